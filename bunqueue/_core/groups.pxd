# Job groups of one queue: a lane per group, fair rotation between lanes, and per-group limits.
#
# A lane is a ReadyQueue of the group's ready jobs ranked by intra-group priority (lower first), then by
# admission sequence (kept across restarts, since the sequence is part of the job record). Lanes that
# hold ready jobs are linked in a circle; the cursor names the lane visited first by the next claim.
# A claim walks the circle from the cursor and takes the head of the first eligible lane, then moves the
# cursor past that lane: its cost is one heap pop plus the lanes skipped as ineligible, never a scan of
# the jobs. A new lane joins the circle just behind the cursor, so it is visited after every lane that
# was already waiting.
#
# Eligibility, checked only when a lane is visited, in this order: paused (PauseGroup); a manual deadline
# (RateLimitGroup) not yet reached; the concurrency limit, only if the claim carries a default
# (SetGroupConcurrency replaces its value); the rate limit, only if the claim carries a default
# (SetGroupRateLimit replaces its value), as a fixed window opened by the first claim in it.
#
# A lane also counts the group's delayed jobs and its active jobs, so the pending depth that
# groupMaxSize caps and GetGroupActiveCount answer in O(1). A lane lives while it has jobs (ready,
# delayed or active), stored controls or a live runtime window; then it is dropped, so memory follows
# the groups in use. No I/O and no clock: callers pass `now` in epoch milliseconds; a `now` of 0 (a
# removal that does not know the time) keeps every lane that has a deadline or window, live or not.

cimport cython

from bunqueue._core.readyqueue cimport ReadyQueue


@cython.final
cdef class GroupLane:
    cdef readonly str group_id
    cdef ReadyQueue ready
    cdef readonly Py_ssize_t delayed
    cdef readonly Py_ssize_t active
    # The circle of lanes with ready jobs; both None while the lane is out of it.
    cdef GroupLane next
    cdef GroupLane prev
    cdef bint in_rotation
    # Stored controls (persisted by the caller); 0 means "no override".
    cdef long long concurrency
    cdef long long rate_max
    cdef long long rate_duration
    cdef bint paused
    # Runtime only: RateLimitGroup's "not before" time (0: none) and the open rate window (max 0: none).
    cdef double manual_until
    cdef double window_start
    cdef long long window_count
    cdef long long window_max
    cdef long long window_duration

    cdef bint _has_controls(self) noexcept
    cdef bint _idle(self, double now) noexcept


# A pull's `group` option: the defaults it carries and which lanes it may take from.
@cython.final
cdef class GroupClaim:
    # 0 when the pull carries no such default.
    cdef readonly long long concurrency
    cdef readonly long long limit_max
    cdef readonly long long limit_duration
    # ANY_LANE, ONE_LANE (affinity: a group id) or NO_LANE (affinity: null, ungrouped jobs only).
    cdef readonly int lanes
    cdef readonly object affinity


@cython.final
cdef class GroupScheduler:
    cdef dict _lanes
    cdef GroupLane _cursor
    cdef Py_ssize_t _rotation_size
    # Grouped jobs waiting (ready or delayed), over all lanes: GetGroupsJobsCount.
    cdef Py_ssize_t _pending
    cdef Py_ssize_t _ready
    # Set by every claim that found nothing: the earliest time a skipped lane becomes eligible by
    # itself (a manual deadline or a rate window ending), or 0 when none will.
    cdef readonly double retry_at

    cdef GroupLane _lane(self, str group_id)
    cdef void _join_rotation(self, GroupLane lane) noexcept
    cdef void _leave_rotation(self, GroupLane lane) noexcept
    cdef void _drop_if_idle(self, GroupLane lane, double now)
    # 0 when `lane` may be claimed from now; else the time it may be by itself (-1: not by itself).
    cdef double _blocked_until(self, GroupLane lane, double now, GroupClaim claim)
    cdef object _take(self, GroupLane lane, double now, GroupClaim claim)
