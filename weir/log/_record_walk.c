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
 *
 * columns(batches, start, end, with_headers, allocate)
 *     -> (rows, offsets, timestamps, timestamp_types, keys, values, headers)
 *
 * The readers' walk (weir/spark/records.py): the records of `batches`, a list of
 * (records, count, base_offset, base_timestamp, max_timestamp, log_append_time), whose offsets lie
 * in [start, end), as Arrow buffers (native byte order) that pyarrow wraps without a copy, each
 * written into `allocate(size)`, a writable buffer of at least `size` bytes, sized for the worst
 * case: offsets and timestamps (microseconds, as Spark's TimestampType holds them; LogAppendTime:
 * the batch's max timestamp) int64,
 * timestamp types int32 (0 CreateTime, 1 LogAppendTime), keys and values binary columns - each
 * (validity bitmap or None, int32 offsets, data, items, data bytes, null count) - and,
 * with_headers, the headers list column as (int32 list offsets, header keys, header values), else
 * None. Records are checked as the validator checks them, minus the offset deltas, and a
 * malformed one raises ValueError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
} cursor;

/* Inlined on the per-record path: the compiler left these as calls. */
#define HOT static inline __attribute__((always_inline))

/* 0 on success; -1 if the varint runs past the end or is longer than max_bytes. */
static int read_unsigned_slow(cursor *c, int max_bytes, uint64_t *out) {
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

HOT int read_unsigned(cursor *c, int max_bytes, uint64_t *out) {
    if (c->p < c->end && *c->p < 0x80) {  /* most varints of a record are one byte */
        *out = *c->p++;
        return 0;
    }
    return read_unsigned_slow(c, max_bytes, out);
}

HOT int read_varint(cursor *c, int32_t *out) {
    uint64_t raw;
    if (read_unsigned(c, 5, &raw) < 0)
        return -1;
    uint32_t u = (uint32_t)raw;
    *out = (int32_t)((u >> 1) ^ (~(u & 1) + 1));
    return 0;
}

HOT int read_varlong(cursor *c, int64_t *out) {
    uint64_t raw;
    if (read_unsigned(c, 10, &raw) < 0)
        return -1;
    *out = (int64_t)((raw >> 1) ^ (~(raw & 1) + 1));
    return 0;
}

HOT int skip(cursor *c, int32_t length) {
    if (length < 0 || length > c->end - c->p)
        return -1;
    c->p += length;
    return 0;
}

static PyObject *malformed(Py_ssize_t index, const char *what) {
    PyErr_Format(PyExc_ValueError, "record %zd: %s", index, what);
    return NULL;
}

/* One field of a record read from `record`: its length (-1: null) and where its bytes start. */
HOT int read_bytes(cursor *record, int32_t *length, const uint8_t **bytes) {
    if (read_varint(record, length) < 0 || *length < -1)
        return -1;
    *bytes = record->p;
    return *length > 0 ? skip(record, *length) : 0;
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

/* A column's buffer, taken from the caller's `allocate(size)` (a writable buffer object), written
 * here and handed back with the bytes used. pyarrow's pool keeps freed pages for the next read,
 * where bytes objects of this size went back to the kernel and each read paid a page fault every
 * 4 KiB, about as much as the walk itself. */
typedef struct {
    PyObject *obj;
    Py_buffer view;
} out_buffer;

static void *out_new(out_buffer *o, PyObject *allocate, Py_ssize_t size) {
    o->obj = PyObject_CallFunction(allocate, "n", size);
    if (o->obj == NULL)
        return NULL;
    if (PyObject_GetBuffer(o->obj, &o->view, PyBUF_WRITABLE) < 0) {
        Py_CLEAR(o->obj);
        return NULL;
    }
    if (o->view.len < size) {
        PyErr_Format(PyExc_ValueError, "allocate(%zd) gave %zd bytes", size, o->view.len);
        PyBuffer_Release(&o->view);
        Py_CLEAR(o->obj);
        return NULL;
    }
    return o->view.buf;
}

static void out_clear(out_buffer *o) {
    if (o->obj != NULL) {
        PyBuffer_Release(&o->view);
        Py_CLEAR(o->obj);
    }
}

/* The buffer object, its reference passed to the caller. */
static PyObject *out_take(out_buffer *o) {
    PyBuffer_Release(&o->view);
    PyObject *obj = o->obj;
    o->obj = NULL;
    return obj;
}

/* An Arrow binary column under construction, in buffers sized for the worst case. */
typedef struct {
    out_buffer validity, offsets, data;
    Py_ssize_t n, size, nulls;
} binary_column;

static int binary_init(binary_column *b, PyObject *allocate, Py_ssize_t max_items, Py_ssize_t max_bytes) {
    b->n = b->size = b->nulls = 0;
    uint8_t *validity = out_new(&b->validity, allocate, (max_items + 7) / 8);
    int32_t *offsets = validity ? out_new(&b->offsets, allocate, (max_items + 1) * (Py_ssize_t)sizeof(int32_t)) : NULL;
    if (offsets == NULL || out_new(&b->data, allocate, max_bytes) == NULL)
        return -1;
    memset(validity, 0, (max_items + 7) / 8);
    offsets[0] = 0;
    return 0;
}

static void binary_clear(binary_column *b) {
    out_clear(&b->validity);
    out_clear(&b->offsets);
    out_clear(&b->data);
}

/* Append `length` bytes (-1: a null). */
HOT int binary_append(binary_column *b, const uint8_t *bytes, int32_t length) {
    if (length < 0) {
        b->nulls++;
    } else {
        if (b->size + length > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "more than 2 GiB of keys, values or headers in one read");
            return -1;
        }
        memcpy((uint8_t *)b->data.view.buf + b->size, bytes, length);
        b->size += length;
        ((uint8_t *)b->validity.view.buf)[b->n / 8] |= (uint8_t)(1 << (b->n % 8));
    }
    b->n++;
    ((int32_t *)b->offsets.view.buf)[b->n] = (int32_t)b->size;
    return 0;
}

/* (validity or None, offsets, data, items, data bytes, null count); the buffers pass to the tuple. */
static PyObject *binary_finish(binary_column *b) {
    PyObject *validity = b->nulls ? out_take(&b->validity) : Py_NewRef(Py_None);
    PyObject *offsets = out_take(&b->offsets), *data = out_take(&b->data);
    return Py_BuildValue("(NNNnnn)", validity, offsets, data, b->n, b->size, b->nulls);
}

typedef struct {
    Py_buffer view;
    Py_ssize_t count;
    long long base_offset, base_ts, max_ts;
    int log_append;
} batch_arg;

static PyObject *columns(PyObject *self, PyObject *args) {
    PyObject *batch_list, *allocate;
    long long start, end;
    int with_headers;
    if (!PyArg_ParseTuple(args, "O!LLpO", &PyList_Type, &batch_list, &start, &end, &with_headers, &allocate))
        return NULL;
    Py_ssize_t n_batches = PyList_GET_SIZE(batch_list);
    batch_arg *batches = PyMem_Calloc(n_batches ? n_batches : 1, sizeof(batch_arg));
    if (batches == NULL)
        return PyErr_NoMemory();
    Py_ssize_t parsed = 0, max_rows = 0, max_bytes = 0;
    PyObject *result = NULL;
    out_buffer offsets = {0}, timestamps = {0}, types = {0}, header_offsets = {0};
    binary_column keys = {0}, values = {0}, header_keys = {0}, header_values = {0};
    for (; parsed < n_batches; parsed++) {
        batch_arg *b = &batches[parsed];
        if (!PyArg_ParseTuple(PyList_GET_ITEM(batch_list, parsed), "y*nLLLp;a batch is (records, count, "
                              "base_offset, base_timestamp, max_timestamp, log_append_time)", &b->view,
                              &b->count, &b->base_offset, &b->base_ts, &b->max_ts, &b->log_append))
            goto done;
        /* a record takes 7 bytes at least: a count beyond that is a lie the walk will find */
        max_rows += b->count < b->view.len / 7 ? b->count : b->view.len / 7;
        max_bytes += b->view.len;
    }
    int64_t *offset_out = out_new(&offsets, allocate, max_rows * (Py_ssize_t)sizeof(int64_t));
    int64_t *timestamp_out = offset_out ? out_new(&timestamps, allocate, max_rows * (Py_ssize_t)sizeof(int64_t)) : NULL;
    int32_t *type_out = timestamp_out ? out_new(&types, allocate, max_rows * (Py_ssize_t)sizeof(int32_t)) : NULL;
    if (type_out == NULL || binary_init(&keys, allocate, max_rows, max_bytes) < 0
            || binary_init(&values, allocate, max_rows, max_bytes) < 0)
        goto done;
    int32_t *header_offset_out = NULL;
    if (with_headers) {  /* a header takes 2 bytes at least */
        header_offset_out = out_new(&header_offsets, allocate, (max_rows + 1) * (Py_ssize_t)sizeof(int32_t));
        if (header_offset_out == NULL || binary_init(&header_keys, allocate, max_bytes / 2, max_bytes) < 0
                || binary_init(&header_values, allocate, max_bytes / 2, max_bytes) < 0)
            goto done;
        header_offset_out[0] = 0;
    }
    Py_ssize_t rows = 0;
    for (Py_ssize_t k = 0; k < n_batches; k++) {
        batch_arg *b = &batches[k];
        cursor c = {(const uint8_t *)b->view.buf, (const uint8_t *)b->view.buf + b->view.len};
        for (Py_ssize_t i = 0; i < b->count; i++) {
            int32_t length, offset_delta, key_length, value_length, header_count;
            int64_t ts_delta, offset;
            const uint8_t *key, *value;
            if (read_varint(&c, &length) < 0 || length < 6 || length > c.end - c.p) {
                PyErr_Format(PyExc_ValueError, "batch at offset %lld, record %zd: bad length, or records "
                             "run past the end of the batch", b->base_offset, i);
                goto done;
            }
            cursor record = {c.p + 1, c.p + length};  /* after the attributes: unused in v2 */
            c.p += length;
            if (read_varlong(&record, &ts_delta) < 0 || read_varint(&record, &offset_delta) < 0
                    || read_bytes(&record, &key_length, &key) < 0
                    || read_bytes(&record, &value_length, &value) < 0
                    || read_varint(&record, &header_count) < 0 || header_count < 0) {
                PyErr_Format(PyExc_ValueError, "batch at offset %lld, record %zd: malformed", b->base_offset, i);
                goto done;
            }
            offset = b->base_offset + offset_delta;
            int kept = start <= offset && offset < end;
            for (int32_t h = 0; h < header_count; h++) {
                int32_t header_key_length, header_value_length;
                const uint8_t *header_key, *header_value;
                if (read_bytes(&record, &header_key_length, &header_key) < 0 || header_key_length < 0
                        || read_bytes(&record, &header_value_length, &header_value) < 0) {
                    PyErr_Format(PyExc_ValueError, "batch at offset %lld, record %zd: malformed header",
                                 b->base_offset, i);
                    goto done;
                }
                if (kept && with_headers && (binary_append(&header_keys, header_key, header_key_length) < 0
                        || binary_append(&header_values, header_value, header_value_length) < 0))
                    goto done;
            }
            if (record.p != record.end) {
                PyErr_Format(PyExc_ValueError, "batch at offset %lld, record %zd: fields do not end where "
                             "its length says", b->base_offset, i);
                goto done;
            }
            if (!kept)
                continue;
            if (binary_append(&keys, key, key_length) < 0 || binary_append(&values, value, value_length) < 0)
                goto done;
            offset_out[rows] = offset;
            int64_t ms = b->max_ts;
            if (!b->log_append && __builtin_add_overflow((int64_t)b->base_ts, ts_delta, &ms)) {
                PyErr_Format(PyExc_ValueError, "batch at offset %lld, record %zd: timestamp overflows",
                             b->base_offset, i);
                goto done;
            }
            if (__builtin_mul_overflow(ms, (int64_t)1000, &timestamp_out[rows])) {
                PyErr_Format(PyExc_ValueError, "batch at offset %lld, record %zd: timestamp %lld ms is out of "
                             "range in microseconds", b->base_offset, i, (long long)ms);
                goto done;
            }
            type_out[rows] = b->log_append;
            rows++;
            if (with_headers)
                header_offset_out[rows] = (int32_t)header_keys.n;
        }
    }
    PyObject *headers = Py_NewRef(Py_None);
    if (with_headers)
        Py_SETREF(headers, Py_BuildValue("(NNN)", out_take(&header_offsets), binary_finish(&header_keys),
                                         binary_finish(&header_values)));
    if (headers != NULL)
        result = Py_BuildValue("(nNNNNNN)", rows, out_take(&offsets), out_take(&timestamps), out_take(&types),
                               binary_finish(&keys), binary_finish(&values), headers);
done:
    for (Py_ssize_t k = 0; k < parsed; k++)
        PyBuffer_Release(&batches[k].view);
    PyMem_Free(batches);
    out_clear(&offsets);
    out_clear(&timestamps);
    out_clear(&types);
    out_clear(&header_offsets);
    binary_clear(&keys);
    binary_clear(&values);
    binary_clear(&header_keys);
    binary_clear(&header_values);
    return result;
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS, "Check the records section of a batch; see the module source."},
    {"columns", columns, METH_VARARGS, "The records of batches as Arrow buffers; see the module source."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_record_walk", NULL, -1, methods};

PyMODINIT_FUNC PyInit__record_walk(void) {
    return PyModule_Create(&module);
}
