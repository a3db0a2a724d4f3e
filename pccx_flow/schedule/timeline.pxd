# Declarations Cython reads beside timeline.py when it compiles it (setup.py); Python never
# reads this file. The three classes become extension types: each attribute is a field of
# the object that compiled methods reach directly, not through a slot descriptor looked up
# on the type (every placement reads and writes a few dozen of them). Only attributes are
# declared, and only as Python objects: a list, dict, set or tuple where the source never
# holds anything else (None aside), `object` otherwise - never a C number, which would
# wrap or refuse a large int where Python's does not. Every attribute the source assigns
# must be declared here (an extension type has no __dict__: a new one would raise
# AttributeError in the compiled build only; tests/test_compiled.py compares the two
# lists).

cdef class BusyIntervals:
    cdef public list starts, finishes
    cdef public object last

cdef class CapacityLedger:
    cdef public object size, block, _last_lazy, _peak, open_bytes
    cdef public list _bt, _times, _raw, _max, _shift

cdef class Timeline:
    cdef public object problem, on_place, _no_comm, _turn, _turn_unready, _ready_left
    cdef public tuple _hint, _floor
    cdef public dict slots, memory_wait, _lanes, _pools, _waiting, _released, _inputs_done
    cdef public dict _memo, _ledgers, _demands, _promised
    cdef public set _uniform_rows, _withheld, _promised_nodes
    cdef public list _unread, _hold_end, _admit_order, _initial
