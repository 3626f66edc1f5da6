/* The per-record walk of the batch validator (weir/log/log_validator.py), in C because it runs
 * over every produced record: in Python it cost several microseconds a record, more than all
 * the rest of a produce.
 *
 * walk(records, count, base_timestamp, last_offset_delta, strict_offsets, want_keyless,
 *      earliest, latest, target) -> (max_timestamp, keyless, out_of_range, first_at_target)
 *
 * `records` is the uncompressed records section of a magic-v2 batch. Each record is
 *   length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
 *   keyLength varint, key, valueLength varint, value, headerCount varint,
 *   [headerKeyLength varint, headerKey, headerValueLength varint, headerValue] ...
 * with zigzag varints (at most 5 bytes) and varlongs (at most 10 bytes), as Kafka writes them.
 * The walk checks that the section holds exactly `count` such records, each ending where its
 * length says, with offset deltas 0, 1, 2, ... (strict_offsets) or increasing up to
 * last_offset_delta (a compacted batch). It returns the largest record timestamp (-1 if none is
 * larger), the indexes of records without a key (a list if want_keyless, else None), and the
 * (index, timestamp) of records whose timestamp is not -1 and lies outside [earliest, latest], and
 * the (offset delta, timestamp) of the first record whose timestamp is >= target, or None
 * (ListOffsets by timestamp). A malformed section raises ValueError saying what is wrong.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
} cursor;

/* 0 on success; -1 if the varint runs past the end or is longer than max_bytes. */
static int read_unsigned(cursor *c, int max_bytes, uint64_t *out) {
    uint64_t value = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (c->p >= c->end)
            return -1;
        uint8_t b = *c->p++;
        value |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            *out = value;
            return 0;
        }
    }
    return -1;
}

static int read_varint(cursor *c, int32_t *out) {
    uint64_t raw;
    if (read_unsigned(c, 5, &raw) < 0)
        return -1;
    uint32_t u = (uint32_t)raw;
    *out = (int32_t)((u >> 1) ^ (~(u & 1) + 1));
    return 0;
}

static int read_varlong(cursor *c, int64_t *out) {
    uint64_t raw;
    if (read_unsigned(c, 10, &raw) < 0)
        return -1;
    *out = (int64_t)((raw >> 1) ^ (~(raw & 1) + 1));
    return 0;
}

static int skip(cursor *c, int32_t length) {
    if (length < 0 || length > c->end - c->p)
        return -1;
    c->p += length;
    return 0;
}

static PyObject *malformed(Py_ssize_t index, const char *what) {
    PyErr_Format(PyExc_ValueError, "record %zd: %s", index, what);
    return NULL;
}

static PyObject *walk(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t count;
    long long base_ts, earliest, latest, target;
    int last_offset_delta, strict, want_keyless;
    if (!PyArg_ParseTuple(args, "y*nLippLLL", &view, &count, &base_ts, &last_offset_delta, &strict,
                          &want_keyless, &earliest, &latest, &target))
        return NULL;
    PyObject *keyless = NULL, *out_of_range = NULL, *first_at_target = NULL, *result = NULL;
    keyless = want_keyless ? PyList_New(0) : Py_NewRef(Py_None);
    out_of_range = PyList_New(0);
    if (keyless == NULL || out_of_range == NULL)
        goto done;

    cursor c = {(const uint8_t *)view.buf, (const uint8_t *)view.buf + view.len};
    int64_t max_ts = -1;
    int64_t previous_delta = -1;
    for (Py_ssize_t i = 0; i < count; i++) {
        int32_t length, offset_delta, key_length, value_length, header_count;
        int64_t ts_delta, ts;
        if (read_varint(&c, &length) < 0) {
            malformed(i, "bad length varint, or records run past the end of the batch");
            goto done;
        }
        if (length < 6 || length > c.end - c.p) {  /* attributes + five one-byte varints at least */
            malformed(i, "length does not fit the batch");
            goto done;
        }
        cursor record = {c.p, c.p + length};
        c.p += length;
        record.p++;  /* attributes: unused in v2 */
        if (read_varlong(&record, &ts_delta) < 0 || read_varint(&record, &offset_delta) < 0) {
            malformed(i, "bad timestamp or offset delta varint");
            goto done;
        }
        if (strict ? offset_delta != i
                   : !(previous_delta < offset_delta && offset_delta <= last_offset_delta)) {
            PyErr_Format(PyExc_ValueError, "record %zd has offset delta %d", i, offset_delta);
            goto done;
        }
        previous_delta = offset_delta;
        if (read_varint(&record, &key_length) < 0 || key_length < -1
                || (key_length > 0 && skip(&record, key_length) < 0)) {
            malformed(i, "bad key length");
            goto done;
        }
        if (key_length < 0 && want_keyless) {
            PyObject *index = PyLong_FromSsize_t(i);
            if (index == NULL || PyList_Append(keyless, index) < 0) {
                Py_XDECREF(index);
                goto done;
            }
            Py_DECREF(index);
        }
        if (read_varint(&record, &value_length) < 0 || value_length < -1
                || (value_length > 0 && skip(&record, value_length) < 0)) {
            malformed(i, "bad value length");
            goto done;
        }
        if (read_varint(&record, &header_count) < 0 || header_count < 0) {
            malformed(i, "bad headers count");
            goto done;
        }
        for (int32_t h = 0; h < header_count; h++) {
            int32_t header_key_length, header_value_length;
            if (read_varint(&record, &header_key_length) < 0 || header_key_length < 0
                    || skip(&record, header_key_length) < 0) {
                malformed(i, "a header without a key, or a bad header key length");
                goto done;
            }
            if (read_varint(&record, &header_value_length) < 0 || header_value_length < -1
                    || (header_value_length > 0 && skip(&record, header_value_length) < 0)) {
                malformed(i, "bad header value length");
                goto done;
            }
        }
        if (record.p != record.end) {
            malformed(i, "fields do not end where its length says");
            goto done;
        }
        if (__builtin_add_overflow((int64_t)base_ts, ts_delta, &ts)) {
            malformed(i, "timestamp overflows");
            goto done;
        }
        if (ts > max_ts)
            max_ts = ts;
        if (ts >= target && first_at_target == NULL) {
            first_at_target = Py_BuildValue("(iL)", offset_delta, (long long)ts);
            if (first_at_target == NULL)
                goto done;
        }
        if (ts != -1 && (ts < earliest || ts > latest)) {
            PyObject *entry = Py_BuildValue("(nL)", i, (long long)ts);
            if (entry == NULL || PyList_Append(out_of_range, entry) < 0) {
                Py_XDECREF(entry);
                goto done;
            }
            Py_DECREF(entry);
        }
    }
    if (c.p != c.end) {
        PyErr_Format(PyExc_ValueError, "%zd bytes after the %zd declared records", (Py_ssize_t)(c.end - c.p),
                     count);
        goto done;
    }
    result = Py_BuildValue("(LOOO)", (long long)max_ts, keyless, out_of_range,
                           first_at_target ? first_at_target : Py_None);
done:
    Py_XDECREF(keyless);
    Py_XDECREF(out_of_range);
    Py_XDECREF(first_at_target);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS, "Check the records section of a batch; see the module source."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_record_walk", NULL, -1, methods};

PyMODINIT_FUNC PyInit__record_walk(void) {
    return PyModule_Create(&module);
}
