/* Optional native kernels for value keys (see fncache/_speedups.pyi, fncache/values/arrow.py and
 * fncache/values/hasher.py).
 *
 * mask_into: keying a nullable Arrow column means hashing its values with the bytes under null
 * slots zeroed. In numpy that takes four passes over each block (unpack the bitmap, widen it,
 * multiply, hash); here the masking is one pass that writes into a block the caller then hashes
 * while it is still in cache.
 *
 * views_into: string and binary views are keyed as the plain arrays they stand for. Without
 * this kernel they are cast to plain arrays first, a copy of every value.
 *
 * persistent_ids: the canonical pickler's persistent_id hook, answered in C for the objects it
 * leaves alone (all but sets, pickle buffers and fncache.ref'd objects).
 *
 * Each gives exactly the bytes (or digests) the code without it gives: this module only makes
 * keys faster, and the package works without it.
 *
 * Inputs are buffers whose sizes are checked against each other before anything is read; no
 * function keeps a pointer after it returns. The loops run without the GIL: the buffers are
 * held for the whole call, so other threads may run but cannot free them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ROW_MASK[b][j]: all ones when bit j of bitmap byte b is set (slot j of the 8 is valid). */
static uint64_t ROW_MASK[256][8];

static void
init_row_mask(void)
{
    for (int b = 0; b < 256; b++) {
        for (int j = 0; j < 8; j++) {
            ROW_MASK[b][j] = ((b >> j) & 1) ? ~(uint64_t)0 : 0;
        }
    }
}

/* The 8 validity bits of slots [bit, bit + 8) as one byte, bit 0 for the first slot. Reads
 * only the bytes that hold those bits (the caller checked that they exist). */
static inline uint8_t
bits_at(const uint8_t *bitmap, Py_ssize_t bit)
{
    Py_ssize_t q = bit >> 3;
    int s = (int)(bit & 7);
    if (s == 0) {
        return bitmap[q];
    }
    return (uint8_t)((bitmap[q] >> s) | (bitmap[q + 1] << (8 - s)));
}

static inline int
bit_at(const uint8_t *bitmap, Py_ssize_t bit)
{
    return (bitmap[bit >> 3] >> (bit & 7)) & 1;
}

/* out = values with null slots zeroed, for rows of `units` elements of type T, the bitmap read
 * from bit `bit`. One function per unit type; rows of one unit from a bitmap that starts on a
 * byte boundary (the common case) have a loop of their own, which the compiler vectorises. */
#define DEFINE_MASK(NAME, T)                                                                  \
    static void NAME##_one(const T *restrict v, T *restrict out, Py_ssize_t n,                \
                           const uint8_t *restrict bp)                                         \
    {                                                                                          \
        for (Py_ssize_t i = 0; i + 8 <= n; i += 8) {                                           \
            const uint64_t *m = ROW_MASK[bp[i >> 3]];                                          \
            for (int j = 0; j < 8; j++) {                                                      \
                out[i + j] = v[i + j] & (T)m[j];                                               \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    static void NAME(const T *restrict v, T *restrict out, Py_ssize_t n, Py_ssize_t units,    \
                     const uint8_t *restrict bitmap, Py_ssize_t bit)                           \
    {                                                                                          \
        Py_ssize_t i = 0;                                                                      \
        if (units == 1 && (bit & 7) == 0) {                                                    \
            NAME##_one(v, out, n, bitmap + (bit >> 3));                                        \
            i = n - n % 8;                                                                     \
        }                                                                                      \
        for (; i + 8 <= n; i += 8) {                                                           \
            const uint64_t *m = ROW_MASK[bits_at(bitmap, bit + i)];                            \
            for (int j = 0; j < 8; j++) {                                                      \
                const T mj = (T)m[j];                                                          \
                const Py_ssize_t at = (i + j) * units;                                         \
                for (Py_ssize_t u = 0; u < units; u++) {                                       \
                    out[at + u] = v[at + u] & mj;                                              \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        for (; i < n; i++) { /* the last n % 8 rows: their bitmap byte may be the last one */ \
            const T mj = bit_at(bitmap, bit + i) ? (T)~(T)0 : (T)0;                            \
            for (Py_ssize_t u = 0; u < units; u++) {                                           \
                out[i * units + u] = v[i * units + u] & mj;                                    \
            }                                                                                  \
        }                                                                                      \
    }

DEFINE_MASK(mask_u8, uint8_t)
DEFINE_MASK(mask_u16, uint16_t)
DEFINE_MASK(mask_u32, uint32_t)
DEFINE_MASK(mask_u64, uint64_t)

/* A bitmap must hold every bit that is read: bits [bit, bit + n). */
static int
check_bitmap(const Py_buffer *bitmap, Py_ssize_t bit, Py_ssize_t n, const char *fn)
{
    if (bit < 0) {
        PyErr_Format(PyExc_ValueError, "%s: bit_offset must be >= 0", fn);
        return -1;
    }
    /* (bit + n <= 8 * len, written so that no sum can overflow) */
    if (n > 0 && (bit > 8 * bitmap->len || n > 8 * bitmap->len - bit)) {
        PyErr_Format(PyExc_ValueError, "%s: bitmap of %zd bytes is too short for %zd slots "
                     "from bit %zd", fn, bitmap->len, n, bit);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(mask_into_doc,
"mask_into(values, bitmap, bit_offset, width, out)\n--\n\n"
"Copy ``values`` (rows of ``width`` bytes) into ``out`` with the bytes of every row whose\n"
"validity bit is 0 zeroed. Row i's bit is bit ``bit_offset + i`` of ``bitmap`` (least\n"
"significant bit first, as in Arrow). ``out`` must hold at least ``len(values)`` bytes.");

static PyObject *
mask_into(PyObject *self, PyObject *args)
{
    Py_buffer values, bitmap, out;
    Py_ssize_t bit, width;
    PyObject *result = NULL;

    if (!PyArg_ParseTuple(args, "y*y*nnw*:mask_into", &values, &bitmap, &bit, &width, &out)) {
        return NULL;
    }
    if (width <= 0 || values.len % width != 0) {
        PyErr_Format(PyExc_ValueError, "mask_into: width %zd does not divide %zd bytes",
                     width, values.len);
        goto done;
    }
    if (out.len < values.len) {
        PyErr_Format(PyExc_ValueError, "mask_into: out holds %zd bytes, %zd needed",
                     out.len, values.len);
        goto done;
    }
    Py_ssize_t n = values.len / width;
    if (check_bitmap(&bitmap, bit, n, "mask_into") < 0) {
        goto done;
    }
    /* The widest unit that divides the width and that both pointers are aligned to. */
    uintptr_t both = (uintptr_t)values.buf | (uintptr_t)out.buf;
    Py_ssize_t unit = 8;
    while (unit > 1 && (width % unit != 0 || both % unit != 0)) {
        unit >>= 1;
    }
    const uint8_t *bm = (const uint8_t *)bitmap.buf;
    Py_BEGIN_ALLOW_THREADS
    switch (unit) {
    case 8:
        mask_u64((const uint64_t *)values.buf, (uint64_t *)out.buf, n, width / 8, bm, bit);
        break;
    case 4:
        mask_u32((const uint32_t *)values.buf, (uint32_t *)out.buf, n, width / 4, bm, bit);
        break;
    case 2:
        mask_u16((const uint16_t *)values.buf, (uint16_t *)out.buf, n, width / 2, bm, bit);
        break;
    default:
        mask_u8((const uint8_t *)values.buf, (uint8_t *)out.buf, n, width, bm, bit);
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&values);
    PyBuffer_Release(&bitmap);
    PyBuffer_Release(&out);
    return result;
}

/* nulls_empty: whether every null slot of a string, binary or list array is empty (ends where
 * it begins). SSE2 (every x86-64 CPU) compares 8 slots at a time; elsewhere a loop without
 * branches per slot (nulls are scattered: a branch would mispredict often). */
#if defined(__SSE2__)
#include <emmintrin.h>

/* Bit j set when slot j of the 8 from o is empty. */
static inline unsigned
empty8_u32(const uint32_t *o)
{
    const __m128i a0 = _mm_loadu_si128((const __m128i *)o);
    const __m128i b0 = _mm_loadu_si128((const __m128i *)(o + 1));
    const __m128i a1 = _mm_loadu_si128((const __m128i *)(o + 4));
    const __m128i b1 = _mm_loadu_si128((const __m128i *)(o + 5));
    return (unsigned)_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(a0, b0)))
        | ((unsigned)_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(a1, b1))) << 4);
}

static inline unsigned
empty2_u64(const uint64_t *o)
{
    /* Two 64-bit lanes are equal when both their 32-bit halves are. */
    const __m128i eq = _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)o),
                                       _mm_loadu_si128((const __m128i *)(o + 1)));
    const __m128i both = _mm_and_si128(eq, _mm_shuffle_epi32(eq, _MM_SHUFFLE(2, 3, 0, 1)));
    return (unsigned)_mm_movemask_pd(_mm_castsi128_pd(both));
}

static inline unsigned
empty8_u64(const uint64_t *o)
{
    return empty2_u64(o) | (empty2_u64(o + 2) << 2) | (empty2_u64(o + 4) << 4)
        | (empty2_u64(o + 6) << 6);
}
#else
#define EMPTY8(T)                                                                             \
    static inline unsigned empty8_##T(const T##_t *o)                                         \
    {                                                                                          \
        unsigned e = 0;                                                                        \
        for (int j = 0; j < 8; j++) {                                                          \
            e |= (unsigned)(o[j + 1] == o[j]) << j;                                            \
        }                                                                                      \
        return e;                                                                              \
    }
EMPTY8(uint32)
EMPTY8(uint64)
#define empty8_u32 empty8_uint32
#define empty8_u64 empty8_uint64
#endif

#define DEFINE_NULLS_EMPTY(SUFFIX, T)                                                         \
    static int nulls_empty_##SUFFIX(const T *o, Py_ssize_t n, const uint8_t *bitmap,          \
                                    Py_ssize_t bit)                                            \
    {                                                                                          \
        unsigned seen = 0; /* bit j: some null slot j (of 8) is not empty */                 \
        Py_ssize_t i = 0;                                                                      \
        for (; i + 8 <= n; i += 8) {                                                           \
            seen |= ~empty8_##SUFFIX(o + i) & ~(unsigned)bits_at(bitmap, bit + i) & 0xFFu;     \
        }                                                                                      \
        for (; i < n; i++) {                                                                   \
            seen |= (unsigned)(!bit_at(bitmap, bit + i) && o[i + 1] != o[i]);                  \
        }                                                                                      \
        return seen == 0;                                                                      \
    }

DEFINE_NULLS_EMPTY(u32, uint32_t)
DEFINE_NULLS_EMPTY(u64, uint64_t)

PyDoc_STRVAR(nulls_empty_doc,
"nulls_empty(offsets, bitmap, bit_offset, itemsize) -> bool\n--\n\n"
"Whether every null slot of a string, binary or list array is empty: ``offsets`` holds the\n"
"n + 1 offsets (``itemsize`` 4 or 8 bytes each, native order, aligned) of n slots, slot i\n"
"ending where slot i + 1 begins; slot i's validity is bit ``bit_offset + i`` of ``bitmap``.");

static PyObject *
nulls_empty(PyObject *self, PyObject *args)
{
    Py_buffer offsets, bitmap;
    Py_ssize_t bit, itemsize;
    PyObject *result = NULL;

    if (!PyArg_ParseTuple(args, "y*y*nn:nulls_empty", &offsets, &bitmap, &bit, &itemsize)) {
        return NULL;
    }
    if ((itemsize != 4 && itemsize != 8) || offsets.len % itemsize != 0
            || offsets.len < itemsize) {
        PyErr_Format(PyExc_ValueError, "nulls_empty: %zd bytes are not offsets of %zd bytes "
                     "each", offsets.len, itemsize);
        goto done;
    }
    if ((uintptr_t)offsets.buf % (uintptr_t)itemsize != 0) {
        PyErr_SetString(PyExc_ValueError, "nulls_empty: offsets are not aligned");
        goto done;
    }
    const Py_ssize_t n = offsets.len / itemsize - 1;
    if (check_bitmap(&bitmap, bit, n, "nulls_empty") < 0) {
        goto done;
    }
    int empty;
    const uint8_t *bm = (const uint8_t *)bitmap.buf;
    Py_BEGIN_ALLOW_THREADS
    if (itemsize == 4) {
        empty = nulls_empty_u32((const uint32_t *)offsets.buf, n, bm, bit);
    }
    else {
        empty = nulls_empty_u64((const uint64_t *)offsets.buf, n, bm, bit);
    }
    Py_END_ALLOW_THREADS
    result = PyBool_FromLong(empty);
done:
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&bitmap);
    return result;
}

/* Arrow string and binary views: 16 bytes a slot, a little-endian int32 length first; up to 12
 * bytes of value inline after it, or else a 4-byte prefix, the index of a data buffer and the
 * offset of the value in it. */
#define VIEW_SIZE 16
#define VIEW_INLINE 12

static int32_t
view_field(const uint8_t *view, int at)
{
    int32_t x;
    memcpy(&x, view + at, sizeof x);
    return x;
}

PyDoc_STRVAR(views_into_doc,
"views_into(views, buffers, bitmap, bit_offset, start, base, ends, data) -> (stop, size, base)\n"
"--\n\n"
"Read a string or binary view array as the plain array it stands for, from slot ``start``:\n"
"append the bytes of each non-null value to ``data`` and write where each slot ends, counting\n"
"from ``base`` (null slots are empty; uint64, modulo 2**64), to ``ends``. ``views`` holds the\n"
"slots' views, ``buffers`` the array's data buffers, ``bitmap`` its validity (bit\n"
"``bit_offset + i`` for slot i) or None. Stops when ``ends`` is full, at the end of the\n"
"array, or before a value that ``data`` has no room for. Returns the slot it stopped at, the\n"
"bytes written to ``data`` and the end of the last slot written; when it stopped at ``start``\n"
"itself, ``size`` is the room that value needs. A view that points outside its buffers (or has a\n"
"negative length) raises ValueError.");

static PyObject *
views_into(PyObject *self, PyObject *args)
{
    Py_buffer views, ends, data, bitmap = {0};
    PyObject *buffers_obj, *bitmap_obj, *seq = NULL, *result = NULL;
    Py_buffer *bufs = NULL;
    Py_ssize_t bit, start, nbufs = 0, got = 0;
    unsigned long long base;

    if (!PyArg_ParseTuple(args, "y*OOnnKw*w*:views_into", &views, &buffers_obj, &bitmap_obj,
                          &bit, &start, &base, &ends, &data)) {
        return NULL;
    }
    const int has_bitmap = bitmap_obj != Py_None;
    if (has_bitmap && PyObject_GetBuffer(bitmap_obj, &bitmap, PyBUF_SIMPLE) < 0) {
        bitmap.obj = NULL;
        goto done;
    }
    if (views.len % VIEW_SIZE != 0) {
        PyErr_Format(PyExc_ValueError, "views_into: %zd bytes are not views of 16 bytes",
                     views.len);
        goto done;
    }
    const Py_ssize_t n = views.len / VIEW_SIZE;
    if (start < 0 || start > n) {
        PyErr_Format(PyExc_ValueError, "views_into: start %zd is outside 0..%zd", start, n);
        goto done;
    }
    if (has_bitmap && check_bitmap(&bitmap, bit, n, "views_into") < 0) {
        goto done;
    }
    seq = PySequence_Fast(buffers_obj, "views_into: buffers must be a sequence");
    if (seq == NULL) {
        goto done;
    }
    nbufs = PySequence_Fast_GET_SIZE(seq);
    bufs = PyMem_Calloc(nbufs ? (size_t)nbufs : 1, sizeof(Py_buffer));
    if (bufs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < nbufs; got++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, got), &bufs[got], PyBUF_SIMPLE) < 0) {
            goto done;
        }
    }

    const uint8_t *vp = (const uint8_t *)views.buf;
    const uint8_t *bm = has_bitmap ? (const uint8_t *)bitmap.buf : NULL;
    uint8_t *dp = (uint8_t *)data.buf;
    uint8_t *ep = (uint8_t *)ends.buf;
    const Py_ssize_t room = data.len, slots = ends.len / (Py_ssize_t)sizeof(uint64_t);
    Py_ssize_t i = start, size = 0, bad = -1;
    uint64_t end = (uint64_t)base;
    Py_BEGIN_ALLOW_THREADS
    for (; i < n && i - start < slots; i++) {
        const uint8_t *view = vp + i * VIEW_SIZE;
        if (bm == NULL || bit_at(bm, bit + i)) {
            const int32_t len = view_field(view, 0);
            if (len < 0) {
                bad = i;
                break;
            }
            if (len <= VIEW_INLINE && size + VIEW_INLINE <= room) {
                /* A fixed-size copy is one move; the bytes past the value are overwritten by
                 * the next one or never read. */
                memcpy(dp + size, view + 4, VIEW_INLINE);
            }
            else if (len <= VIEW_INLINE && size + len <= room) {
                memcpy(dp + size, view + 4, (size_t)len);
            }
            else if (len > VIEW_INLINE) {
                const int32_t index = view_field(view, 8), offset = view_field(view, 12);
                if (index < 0 || index >= nbufs || offset < 0
                        || (Py_ssize_t)offset + len > bufs[index].len) {
                    bad = i;
                    break;
                }
                if (size + len > room) {
                    if (i == start) {
                        size = len; /* the room it needs */
                    }
                    break;
                }
                memcpy(dp + size, (const uint8_t *)bufs[index].buf + offset, (size_t)len);
            }
            else {
                if (i == start) {
                    size = len; /* the room it needs */
                }
                break; /* an inline value, and no room left: the next call takes it */
            }
            size += len;
            end += (uint64_t)len;
        }
        memcpy(ep + (i - start) * (Py_ssize_t)sizeof(uint64_t), &end, sizeof end);
    }
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, "views_into: the view of slot %zd points outside its "
                     "buffers", bad);
        goto done;
    }
    result = Py_BuildValue("nnK", i, size, (unsigned long long)end);
done:
    for (Py_ssize_t k = 0; k < got; k++) {
        PyBuffer_Release(&bufs[k]);
    }
    PyMem_Free(bufs);
    Py_XDECREF(seq);
    if (bitmap.obj != NULL) {
        PyBuffer_Release(&bitmap);
    }
    PyBuffer_Release(&views);
    PyBuffer_Release(&ends);
    PyBuffer_Release(&data);
    return result;
}

/* persistent_ids: the canonical pickler's persistent_id. The C pickler calls it for every object
 * it saves, ints and strings included, and answers None for all but a few types: as a Python
 * method that call was most of the time of hashing a list or dict of plain values (a list of
 * 10,000 (int, str, float) tuples: 3.7 ms, 0.7 ms with the call in C). Here the answer None is
 * given in C; the Python method (``slow``) is called only for an object of one of the ``special``
 * types (exact types, as the method tests them) or whenever ``refs`` (the registry of
 * ``fncache.ref`` tokens, by id) is not empty, so what it returns is what it always returned. */
static PyObject *
persistent_id_call(PyObject *state, PyObject *obj)
{
    if (PyDict_GET_SIZE(PyTuple_GET_ITEM(state, 1)) == 0) {
        int special = PySet_Contains(PyTuple_GET_ITEM(state, 0), (PyObject *)Py_TYPE(obj));
        if (special < 0) {
            return NULL;
        }
        if (!special) {
            Py_RETURN_NONE;
        }
    }
    return PyObject_CallOneArg(PyTuple_GET_ITEM(state, 2), obj);
}

static PyMethodDef persistent_id_def = {
    "persistent_id", persistent_id_call, METH_O,
    "persistent_id(obj)\n--\n\nNone, or what the Python persistent_id gives for ``obj``.",
};

PyDoc_STRVAR(persistent_ids_doc,
"persistent_ids(special, refs, slow)\n--\n\n"
"A ``persistent_id(obj)`` that returns None unless ``type(obj)`` is in the frozenset\n"
"``special`` or the dict ``refs`` is not empty; then it returns ``slow(obj)``.");

static PyObject *
persistent_ids(PyObject *module, PyObject *args)
{
    PyObject *special, *refs, *slow;

    if (!PyArg_ParseTuple(args, "O!O!O:persistent_ids", &PyFrozenSet_Type, &special,
                          &PyDict_Type, &refs, &slow)) {
        return NULL;
    }
    if (!PyCallable_Check(slow)) {
        PyErr_SetString(PyExc_TypeError, "persistent_ids: slow must be callable");
        return NULL;
    }
    PyObject *state = PyTuple_Pack(3, special, refs, slow);
    if (state == NULL) {
        return NULL;
    }
    PyObject *fn = PyCFunction_NewEx(&persistent_id_def, state, NULL);
    Py_DECREF(state);
    return fn;
}

static PyMethodDef speedups_methods[] = {
    {"mask_into", mask_into, METH_VARARGS, mask_into_doc},
    {"views_into", views_into, METH_VARARGS, views_into_doc},
    {"nulls_empty", nulls_empty, METH_VARARGS, nulls_empty_doc},
    {"persistent_ids", persistent_ids, METH_VARARGS, persistent_ids_doc},
    {NULL, NULL, 0, NULL},
};

static int
speedups_exec(PyObject *module)
{
    init_row_mask();
    return 0;
}

static PyModuleDef_Slot speedups_slots[] = {
    {Py_mod_exec, speedups_exec},
    {0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "fncache._speedups",
    .m_doc = "Optional native kernels for value keys; every function has a numpy twin.",
    .m_size = 0,
    .m_methods = speedups_methods,
    .m_slots = speedups_slots,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModuleDef_Init(&speedups_module);
}
