# The one heap of the compiled core, shared by the ready queue, the timer heap and the lease table.
#
# A 4-ary min-heap of C structs stored inline in one array: half as deep as a binary heap, so a pop
# moves half as many entries, and a node's four children are contiguous, so comparing them costs few
# cache misses. Sifting compares and moves plain memory and never touches a Python object.
#
# The sift routines are written once, over a fused entry type, and Cython specialises them for each
# entry at compile time: the comparison is inlined into every loop, as fast as a hand-written copy.
#
# Indexed use (IndexedHeap below): each key gets a slot, a small integer that never changes while the
# key is in the heap; the key itself and the dict from key to slot are touched only on push and
# removal, and the slot -> heap position array is what every move updates. That keeps "remove by key"
# and "update by key" O(log n) without a Python-level write per swap. Unindexed use (the lease table's
# lazily deleted expiry heap) passes a NULL position array.

cimport cython
from libc.stdint cimport uint32_t, uint64_t


# 32 bytes: two entries to a cache line, and a node's four children in 128 contiguous bytes.
# Order, first difference wins: higher priority; LIFO before FIFO; among LIFO the newest (larger seq);
# among FIFO the earlier run_at; then the smaller seq.
cdef struct ReadyEntry:
    double priority
    double run_at
    uint64_t seq
    uint32_t slot
    uint32_t lifo


# 24 bytes. Order: the earlier `when`, then the smaller seq (the entry scheduled first).
cdef struct DeadlineEntry:
    double when
    uint64_t seq
    uint32_t slot


ctypedef fused HeapEntry:
    ReadyEntry
    DeadlineEntry


cdef enum:
    ARITY = 4
    INITIAL_CAPACITY = 16


cdef inline bint goes_before(const HeapEntry* a, const HeapEntry* b) noexcept:
    if HeapEntry is ReadyEntry:
        if a.priority != b.priority:
            return a.priority > b.priority
        if a.lifo != b.lifo:
            return a.lifo
        if a.lifo:
            return a.seq > b.seq
        if a.run_at != b.run_at:
            return a.run_at < b.run_at
        return a.seq < b.seq
    else:
        if a.when != b.when:
            return a.when < b.when
        return a.seq < b.seq


cdef inline void place(HeapEntry* heap, uint32_t* position_of_slot, Py_ssize_t pos,
                       const HeapEntry* entry) noexcept:
    heap[pos] = entry[0]
    if position_of_slot != NULL:
        position_of_slot[entry.slot] = <uint32_t>pos


cdef inline Py_ssize_t best_child(const HeapEntry* heap, Py_ssize_t size, Py_ssize_t pos) noexcept:
    """The best of the children of `pos`, or -1 when it has none."""
    cdef Py_ssize_t child = pos * ARITY + 1
    cdef Py_ssize_t best, end
    if child >= size:
        return -1
    best = child
    end = min(child + ARITY, size)
    child += 1
    while child < end:
        if goes_before(&heap[child], &heap[best]):
            best = child
        child += 1
    return best


cdef inline void sift_up(HeapEntry* heap, uint32_t* position_of_slot, Py_ssize_t pos) noexcept:
    cdef HeapEntry moving = heap[pos]
    cdef Py_ssize_t parent
    while pos > 0:
        parent = (pos - 1) // ARITY
        if not goes_before(&moving, &heap[parent]):
            break
        place(heap, position_of_slot, pos, &heap[parent])
        pos = parent
    place(heap, position_of_slot, pos, &moving)


cdef inline void sift_down(HeapEntry* heap, uint32_t* position_of_slot, Py_ssize_t size,
                           Py_ssize_t pos) noexcept:
    cdef HeapEntry moving = heap[pos]
    cdef Py_ssize_t best
    while True:
        best = best_child(heap, size, pos)
        if best < 0 or not goes_before(&heap[best], &moving):
            break
        place(heap, position_of_slot, pos, &heap[best])
        pos = best
    place(heap, position_of_slot, pos, &moving)


cdef inline void refill_root(HeapEntry* heap, uint32_t* position_of_slot, Py_ssize_t size) noexcept:
    """After the root was taken and `size` lowered by one: heap[size] is the old last entry.

    Walks the hole at the root down to a leaf along the best children, then sifts the last entry up
    from there. The last entry nearly always belongs near the bottom, so this saves the comparison
    against it at every level that a plain sift-down would make.
    """
    cdef Py_ssize_t pos = 0
    cdef Py_ssize_t best
    if size == 0:
        return
    while True:
        best = best_child(heap, size, pos)
        if best < 0:
            break
        place(heap, position_of_slot, pos, &heap[best])
        pos = best
    if pos != size:
        place(heap, position_of_slot, pos, &heap[size])
        sift_up(heap, position_of_slot, pos)


cdef inline void restore(HeapEntry* heap, uint32_t* position_of_slot, Py_ssize_t size,
                         Py_ssize_t pos) noexcept:
    """Re-establishes heap order around `pos` after its entry changed in either direction."""
    if pos > 0 and goes_before(&heap[pos], &heap[(pos - 1) // ARITY]):
        sift_up(heap, position_of_slot, pos)
    else:
        sift_down(heap, position_of_slot, size, pos)


cdef inline void fill_hole(HeapEntry* heap, uint32_t* position_of_slot, Py_ssize_t size,
                           Py_ssize_t pos) noexcept:
    """After the entry at `pos` was taken and `size` lowered by one: heap[size] is the old last entry."""
    if pos == 0:
        refill_root(heap, position_of_slot, size)
    elif pos != size:
        heap[pos] = heap[size]
        restore(heap, position_of_slot, size, pos)


cdef inline void heapify(HeapEntry* heap, Py_ssize_t size) noexcept:
    """Floyd's bottom-up build, O(n): cheaper than n pushes (unindexed heaps only)."""
    cdef Py_ssize_t pos
    if size < 2:
        return
    for pos in range((size - 2) // ARITY, -1, -1):
        sift_down(heap, <uint32_t*>NULL, size, pos)


# Grows (or first allocates) a C array to `capacity` items; on failure the array is left as it was.
cdef int grow_array(void** array, Py_ssize_t capacity, size_t item_size) except -1


cdef class IndexedHeap:
    # Entries, typed by the subclass (ReadyEntry or DeadlineEntry); _entry_size says how large.
    cdef void* _entries
    cdef size_t _entry_size
    cdef Py_ssize_t _size
    # Capacity of _entries, _position_of_slot and _free_slots alike: there are never more slots than
    # the largest size the heap has had, so one capacity bounds all three. They grow by doubling and
    # only clear() shrinks them: slot numbers up to the peak may still be in use after the heap drains.
    cdef Py_ssize_t _capacity
    # Heap position of the entry that owns each slot; stale for free slots.
    cdef uint32_t* _position_of_slot
    # Slots released by removals, reused before new ones are minted, so slot numbers stay dense.
    cdef uint32_t* _free_slots
    cdef Py_ssize_t _free_count
    # Key held by each slot (None when free); len() is the number of slots ever minted.
    cdef list _key_of_slot
    cdef dict _slot_of_key
    # Named in the OverflowError of a full heap.
    cdef str _kind

    # Slots and positions are 32-bit, which halves the memory a sift's random writes touch; so at most
    # UINT32_MAX entries. The helpers are final: subclasses call them directly, not through a vtable.
    @cython.final
    cdef int _reserve(self, Py_ssize_t needed) except -1

    # Gives `key` a slot and returns it; when `key` already has one, returns that slot as -2 - slot.
    # The caller has reserved room for one more entry. Keys are exact str (the subclass's typed
    # argument check), so the one dict operation inside runs no Python code that could re-enter.
    @cython.final
    cdef Py_ssize_t _claim_slot(self, str key) except -1

    # Frees `slot` and returns the key it held.
    @cython.final
    cdef object _release_slot(self, Py_ssize_t slot)

    # Heap position of `key`, or -1 when it is not in the heap.
    @cython.final
    cdef Py_ssize_t _position(self, object key) except -2

    @cython.final
    cdef int _free_arrays(self) except -1
