"""Configuration: the broker's settings (Kafka's names and defaults), topic configs and their
broker synonyms, and the Kafka settings Weir accepts without acting on."""
