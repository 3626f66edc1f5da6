"""The live web console: `weir console` and the one `weir up` serves."""
