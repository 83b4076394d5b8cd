"""The indexed 4-ary heap shared by the ready queue and the timer heap (see heap.pxd)."""
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from libc.stdint cimport UINT32_MAX, uint32_t


cdef int grow_array(void** array, Py_ssize_t capacity, size_t item_size) except -1:
    cdef void* grown = PyMem_Realloc(array[0], capacity * item_size)
    if grown == NULL:
        raise MemoryError()
    array[0] = grown
    return 0


cdef class IndexedHeap:
    """Keys in a heap of C entries, each key with a slot that tracks its heap position."""

    def __cinit__(self):
        if type(self) is IndexedHeap:
            raise TypeError("IndexedHeap is the base of ReadyQueue and TimerHeap, not a heap of its own")
        self._key_of_slot = []
        self._slot_of_key = {}
        self._kind = "heap"

    def __dealloc__(self):
        self._free_arrays()

    def __len__(self):
        return self._size

    def __contains__(self, key):
        return key in self._slot_of_key

    def clear(self):
        """Drop every entry and give back the memory a past peak left behind."""
        self._free_arrays()
        self._size = self._capacity = self._free_count = 0
        self._key_of_slot = []
        self._slot_of_key = {}
        self._reserve(INITIAL_CAPACITY)

    cdef int _free_arrays(self) except -1:
        PyMem_Free(self._entries)
        PyMem_Free(self._position_of_slot)
        PyMem_Free(self._free_slots)
        self._entries = NULL
        self._position_of_slot = NULL
        self._free_slots = NULL
        return 0

    cdef int _reserve(self, Py_ssize_t needed) except -1:
        cdef Py_ssize_t capacity
        if needed <= self._capacity:
            return 0
        if needed > UINT32_MAX:
            raise OverflowError(f"the {self._kind} is full")
        capacity = min(max(needed, 2 * self._capacity), <Py_ssize_t>UINT32_MAX)
        # Each array is swapped in only once its reallocation succeeded, so a MemoryError leaves the
        # heap intact; a larger capacity on some arrays than on others is harmless.
        grow_array(&self._entries, capacity, self._entry_size)
        grow_array(<void**>&self._position_of_slot, capacity, sizeof(uint32_t))
        grow_array(<void**>&self._free_slots, capacity, sizeof(uint32_t))
        self._capacity = capacity
        return 0

    cdef Py_ssize_t _claim_slot(self, str key) except -1:
        cdef Py_ssize_t slot = (self._free_slots[self._free_count - 1] if self._free_count
                                else len(self._key_of_slot))
        # One dict operation both finds an existing key and records the slot of a new one.
        existing = self._slot_of_key.setdefault(key, slot)
        if existing != slot:
            return -2 - <Py_ssize_t>existing
        if self._free_count:
            self._free_count -= 1
            self._key_of_slot[slot] = key
        else:
            self._key_of_slot.append(key)
        return slot

    cdef object _release_slot(self, Py_ssize_t slot):
        key = self._key_of_slot[slot]
        self._key_of_slot[slot] = None
        del self._slot_of_key[key]
        self._free_slots[self._free_count] = <uint32_t>slot
        self._free_count += 1
        return key

    cdef Py_ssize_t _position(self, object key) except -2:
        slot = self._slot_of_key.get(key)
        if slot is None:
            return -1
        return self._position_of_slot[<Py_ssize_t>slot]
