# The negatives of the pairwise passes (_pairwise.pyx includes this file): a random
# stream per thread, the draws (uniform or by popularity) that skip the items a user
# has seen (a bitmap, a filter per user, the sorted lists), and the tests' entry
# point to them.


# ---- random numbers: one xoshiro256** stream per thread ---------------------------------

cdef struct Rng:
    uint64_t s0
    uint64_t s1
    uint64_t s2
    uint64_t s3


cdef inline uint64_t _rotl(uint64_t x, int k) noexcept nogil:
    return (x << k) | (x >> (64 - k))


cdef inline uint64_t _next(Rng* r) noexcept nogil:
    cdef uint64_t result = _rotl(r.s1 * 5, 7) * 9
    cdef uint64_t t = r.s1 << 17
    r.s2 ^= r.s0
    r.s3 ^= r.s1
    r.s1 ^= r.s2
    r.s0 ^= r.s3
    r.s2 ^= t
    r.s3 = _rotl(r.s3, 45)
    return result


cdef inline double _uniform(Rng* r) noexcept nogil:
    """Uniform on [0, 1)."""
    return (_next(r) >> 11) * (1.0 / 9007199254740992.0)


cdef inline Py_ssize_t _below(Rng* r, Py_ssize_t n) noexcept nogil:
    """Uniform on 0..n-1."""
    cdef Py_ssize_t v = <Py_ssize_t> (_uniform(r) * n)
    return v if v < n else n - 1


cdef inline void _seed(Rng* r, uint64_t seed) noexcept nogil:
    # splitmix64 spreads one seed over the four words (never all zero).
    cdef int i
    cdef uint64_t z
    cdef uint64_t words[4]
    for i in range(4):
        seed += <uint64_t> 0x9E3779B97F4A7C15
        z = seed
        z = (z ^ (z >> 30)) * <uint64_t> 0xBF58476D1CE4E5B9
        z = (z ^ (z >> 27)) * <uint64_t> 0x94D049BB133111EB
        words[i] = z ^ (z >> 31)
    r.s0, r.s1, r.s2, r.s3 = words[0], words[1], words[2], words[3]


# ---- negatives -------------------------------------------------------------------------

cdef struct Negatives:
    const int64_t* seen_ptr     # user u's seen items: seen[seen_ptr[u]:seen_ptr[u + 1]]
    const int64_t* seen         # sorted per user
    const uint64_t* seen_bits   # or NULL: a bit per (user, item), user_words per user
    Py_ssize_t user_words
    # Or, with seen_bits NULL: a filter of each user's seen items (seen_filter), NULL
    # for none: user u's block of bits is the words seen_filter[filter_ptr[u]:
    # filter_ptr[u + 1]], a power of two of them.
    const uint64_t* seen_filter
    const int64_t* filter_ptr
    const double* cumulative    # popularity: cumulative weights of the items (or NULL)
    Py_ssize_t n_items


cdef inline uint64_t _filter_bit(Py_ssize_t item, uint64_t n_bits) noexcept nogil:
    """The bit of ``item`` in a filter block of ``n_bits`` bits (a power of two): bits
    32 and up of the item times 2^64 / golden ratio (Fibonacci hashing)."""
    return ((<uint64_t> item * <uint64_t> 0x9E3779B97F4A7C15) >> 32) & (n_bits - 1)


cdef inline bint _is_seen(const Negatives* neg, Py_ssize_t user,
                          Py_ssize_t item) noexcept nogil:
    """Whether the user has seen the item: a bit of the users x items bitmap when it is
    small enough to stay in cache, else a branch-free bisection of the user's sorted
    list, unless the user's block of the seen filter (:func:`seen_filter`: no seen item
    is missing from it) rules the item out first.  Without the filter most draws would
    be bisections of lists too large for the cache together: a miss to memory at
    nearly every step."""
    cdef Py_ssize_t base, n, half, lo
    cdef uint64_t bit
    if neg.seen_bits != NULL:
        return (neg.seen_bits[user * neg.user_words + (item >> 6)] >> (item & 63)) & 1
    if neg.seen_filter != NULL:
        lo = neg.filter_ptr[user]
        bit = _filter_bit(item, <uint64_t> (neg.filter_ptr[user + 1] - lo) * 64)
        if not (neg.seen_filter[lo + <Py_ssize_t> (bit >> 6)] >> (bit & 63)) & 1:
            return False
    base, n = neg.seen_ptr[user], neg.seen_ptr[user + 1] - neg.seen_ptr[user]
    if n == 0:
        return False
    while n > 1:
        half = n // 2
        base = base + half if neg.seen[base + half] <= item else base
        n -= half
    return neg.seen[base] == item


cdef inline Py_ssize_t _uniform_unseen(Rng* r, const int64_t* seen, Py_ssize_t lo,
                                       Py_ssize_t hi, Py_ssize_t n_items) noexcept nogil:
    """An item drawn uniformly among those not in the sorted seen[lo:hi] (at least one
    exists): the rank-th unseen item is rank + (seen items below it), the count of j
    with seen[j] - j <= rank (seen[j] - j, the unseen items below seen[j], grows with
    j), found by a branch-free bisection."""
    cdef Py_ssize_t rank = _below(r, n_items - (hi - lo))
    cdef Py_ssize_t base = 0, n = hi - lo, half
    if n == 0:
        return rank
    while n > 1:
        half = n // 2
        base = base + half if seen[lo + base + half] - (base + half) <= rank else base
        n -= half
    return rank + base + (1 if seen[lo + base] - base <= rank else 0)


cdef inline Py_ssize_t _draw(Rng* r, const Negatives* neg) noexcept nogil:
    """An item drawn uniformly or by popularity (seen or not): by popularity, the first
    item whose cumulative weight exceeds u, uniform below the total, which is the
    number of items whose cumulative weight is at most u, counted by a branch-free
    bisection (the comparisons of a search for a random u are as good as coin tosses
    to a branch predictor)."""
    cdef Py_ssize_t base = 0, n = neg.n_items, half
    cdef double u
    cdef const double* cumulative = neg.cumulative
    if cumulative == NULL:
        return _below(r, neg.n_items)
    u = _uniform(r) * cumulative[neg.n_items - 1]
    while n > 1:
        half = n // 2
        base = base + half if cumulative[base + half] <= u else base
        n -= half
    return base + (1 if cumulative[base] <= u else 0)


cdef struct Draws:
    # A thread's stream of draws, made DRAWS_AHEAD ahead of their use.
    Py_ssize_t* ring        # RING entries
    uint64_t used           # draws taken so far (unsigned: its remainders by
                            # RING, a power of two, are masks)
    Rng rng                 # the thread's random stream
    const Negatives* negatives
    const int64_t* i_ptr
    const int64_t* i_ind


cdef inline void _start_draws(Draws* dr) noexcept nogil:
    cdef Py_ssize_t i
    dr.used = 0
    for i in range(DRAWS_AHEAD):
        dr.ring[i] = _draw(&dr.rng, dr.negatives)


cdef inline Py_ssize_t _next_draw(Draws* dr, const floating* i_data, const floating* P,
                                  Py_ssize_t n_blocks, Py_ssize_t d,
                                  Py_ssize_t k) noexcept nogil:
    """The next draw of the stream; draws the one DRAWS_AHEAD later (requesting its
    row's pointer), and requests the row of the draw two thirds as far ahead and the
    factors of the one a third as far (only the factors, which its score reads: most
    draws of WARP are tried and not stepped on; the one chosen has its AdaGrad sums and
    last touches requested when it is chosen)."""
    cdef Py_ssize_t item = dr.ring[dr.used % RING], c
    c = _draw(&dr.rng, dr.negatives)
    dr.ring[(dr.used + DRAWS_AHEAD) % RING] = c
    POLYLITE_PREFETCH(dr.i_ptr + c)
    c = dr.ring[(dr.used + 2 * DRAWS_AHEAD // 3) % RING]
    POLYLITE_PREFETCH(dr.i_ind + dr.i_ptr[c])
    POLYLITE_PREFETCH(i_data + dr.i_ptr[c])
    c = dr.ring[(dr.used + DRAWS_AHEAD // 3) % RING]
    _prefetch_row(dr.i_ind + dr.i_ptr[c], dr.i_ptr[c + 1] - dr.i_ptr[c], P,
                  <const floating*> NULL, <const long long*> NULL, n_blocks, d, k)
    dr.used += 1
    return item


cdef inline Py_ssize_t _negative(Draws* dr, Py_ssize_t user, const floating* i_data,
                                 const floating* P, Py_ssize_t n_blocks,
                                 Py_ssize_t d, Py_ssize_t k) noexcept nogil:
    """A negative item of ``user``, never one the user has seen: draws of the stream
    (uniform or by popularity) until an unseen one, at most MAX_REJECTIONS, then one
    uniform among the unseen items by :func:`_uniform_unseen` (uniform draws stay
    exactly uniform over the unseen items either way)."""
    cdef Py_ssize_t item, attempt
    cdef const Negatives* neg = dr.negatives
    for attempt in range(MAX_REJECTIONS):
        item = _next_draw(dr, i_data, P, n_blocks, d, k)
        if not _is_seen(neg, user, item):
            return item
    return _uniform_unseen(&dr.rng, neg.seen, neg.seen_ptr[user], neg.seen_ptr[user + 1],
                           neg.n_items)


def seen_filter(const int64_t[::1] indptr, const int64_t[::1] seen,
                int64_t bits_per_item=16):
    """A filter of every user's seen items (``seen[indptr[u]:indptr[u + 1]]`` for user
    u): returns (``filter_ptr``, ``words``), user u's block being the uint64 words
    ``words[filter_ptr[u]:filter_ptr[u + 1]]``, a power of two of them, at least
    ``bits_per_item`` bits per seen item (at least one word), with the bit
    :func:`_filter_bit` of each seen item set.  An item whose bit is clear is not seen;
    one whose bit is set is seen, or shares its bit with one that is (for items drawn
    at random, about 1 - exp(-n / bits) of them: below 6% at 16 bits per item)."""
    import numpy as np
    need = -(-np.diff(np.asarray(indptr)) * bits_per_item // 64)
    sizes = np.left_shift(1, np.ceil(np.log2(np.maximum(need, 1))).astype(np.int64))
    ptr = np.zeros(sizes.shape[0] + 1, dtype=np.int64)
    np.cumsum(sizes, out=ptr[1:])
    out = np.zeros(int(ptr[-1]), dtype=np.uint64)
    cdef uint64_t[::1] words = out
    cdef const int64_t[::1] start = ptr
    cdef Py_ssize_t u, z
    cdef uint64_t bit
    with nogil:
        for u in range(indptr.shape[0] - 1):
            for z in range(indptr[u], indptr[u + 1]):
                bit = _filter_bit(seen[z], <uint64_t> (start[u + 1] - start[u]) * 64)
                words[start[u] + <Py_ssize_t> (bit >> 6)] |= (<uint64_t> 1) << (bit & 63)
    return ptr, out


def seen_bitmap(const int64_t[::1] users, const int64_t[::1] items, Py_ssize_t n_users,
                Py_ssize_t n_items):
    """The bitmap of the (user, item) pairs, a row of ceil(n_items / 64) words per user."""
    import numpy as np
    cdef Py_ssize_t words = (n_items + 63) // 64, i
    out = np.zeros(n_users * words, dtype=np.uint64)
    cdef uint64_t[::1] bits = out
    with nogil:
        for i in range(users.shape[0]):
            bits[users[i] * words + (items[i] >> 6)] |= (<uint64_t> 1) << (items[i] & 63)
    return out


cdef inline double _harmonic(Py_ssize_t n) noexcept nogil:
    """WARP's rank weight L(n) = sum_{i=1..n} 1/i (Weston et al. 2011)."""
    cdef double total = 0
    cdef Py_ssize_t i
    if n <= 64:
        for i in range(1, n + 1):
            total += 1.0 / i
        return total
    return log(<double> n) + 0.5772156649015329 + 0.5 / n - 1.0 / (12.0 * n * n)


cdef Negatives _negatives_of(const int64_t[::1] seen_ptr, const int64_t[::1] seen,
                            const uint64_t[::1] seen_bits, const int64_t[::1] filter_ptr,
                            const uint64_t[::1] filter_words,
                            const double[::1] cumulative,
                            Py_ssize_t n_items) except *:
    """The :c:type:`Negatives` of these arrays (which must outlive it): the bitmap, the
    filter and the popularity weights taken when not empty; raises when their shapes
    disagree with the users' (``seen_ptr``) and the items'."""
    cdef Negatives negatives
    if ((seen_bits.shape[0] > 0 and
         seen_bits.shape[0] != (seen_ptr.shape[0] - 1) * ((n_items + 63) // 64))
            or (filter_words.shape[0] > 0 and (
                filter_ptr.shape[0] != seen_ptr.shape[0]
                or filter_ptr[filter_ptr.shape[0] - 1] != filter_words.shape[0]))
            or (cumulative.shape[0] > 0 and cumulative.shape[0] != n_items)):
        raise ValueError("the seen items' bitmap or filter, or the popularity weights, "
                         "have shapes that disagree with the users and items")
    negatives.seen_ptr = &seen_ptr[0]
    negatives.seen = &seen[0] if seen.shape[0] > 0 else NULL
    negatives.seen_bits = &seen_bits[0] if seen_bits.shape[0] > 0 else NULL
    negatives.user_words = (n_items + 63) // 64
    negatives.seen_filter = &filter_words[0] if filter_words.shape[0] > 0 else NULL
    negatives.filter_ptr = &filter_ptr[0] if filter_words.shape[0] > 0 else NULL
    negatives.cumulative = &cumulative[0] if cumulative.shape[0] > 0 else NULL
    negatives.n_items = n_items
    return negatives


def draw_negatives(const int64_t[::1] seen_indptr, const int64_t[::1] seen,
                   const uint64_t[::1] seen_bits, const double[::1] cumulative,
                   Py_ssize_t n_items, Py_ssize_t user, Py_ssize_t n_draws, uint64_t seed,
                   filter=None):
    """``n_draws`` negatives of ``user`` as the passes draw them (popularity when
    ``cumulative`` is not empty; ``filter``: the (filter_ptr, words) of
    :func:`seen_filter`, or None); for the tests of their distribution."""
    import numpy as np
    out = np.empty(n_draws, dtype=np.int64)
    cdef int64_t[::1] result = out
    # Item rows without features: the stream's requests have nothing to fetch.
    cdef int64_t[::1] empty_rows = np.zeros(n_items + 1, dtype=np.int64)
    cdef double[::1] nothing = np.zeros(1)
    cdef Negatives negatives
    cdef Draws draws
    cdef Py_ssize_t ring[RING]
    cdef Py_ssize_t i
    cdef const int64_t[::1] filter_ptr = np.zeros(0, dtype=np.int64)
    cdef const uint64_t[::1] filter_words = np.zeros(0, dtype=np.uint64)
    if seen_indptr[user + 1] - seen_indptr[user] >= n_items:
        raise ValueError("the user has seen every item")
    if filter is not None:
        filter_ptr, filter_words = filter
    negatives = _negatives_of(seen_indptr, seen, seen_bits, filter_ptr, filter_words,
                              cumulative, n_items)
    _seed(&draws.rng, seed)
    draws.ring, draws.negatives = ring, &negatives
    draws.i_ptr, draws.i_ind = &empty_rows[0], &empty_rows[0]
    _start_draws(&draws)
    for i in range(n_draws):
        result[i] = _negative(&draws, user, &nothing[0], &nothing[0], 1, 1, 1)
    return out
