"""Job groups: fair round-robin lanes with per-group pause, concurrency and rate limits."""
from bunqueue._core.readyqueue cimport ReadyQueue

cdef enum:
    ANY = 0
    ONE = 1
    NONE = 2

ANY_LANE = ANY
ONE_LANE = ONE
NO_LANE = NONE

# GetGroupRateLimitTtl when the group has neither a manual deadline nor an open window.
NO_WINDOW_TTL = -2


cdef class GroupLane:
    """One group of one queue: its ready jobs, counters, stored controls and runtime windows."""

    def __cinit__(self, str group_id not None):
        self.group_id = group_id
        self.ready = ReadyQueue()

    def __len__(self):
        return len(self.ready)

    cdef bint _has_controls(self) noexcept:
        return self.paused or self.concurrency != 0 or self.rate_max != 0

    cdef bint _idle(self, double now) noexcept:
        return (
            not self.in_rotation
            and self.delayed == 0
            and self.active == 0
            and not self._has_controls()
            and now >= self.manual_until
            and (self.window_max == 0 or now >= self.window_start + self.window_duration)
        )


cdef class GroupClaim:
    """A pull's group defaults: concurrency and limit (0 = absent) and its lane affinity."""

    def __cinit__(self, long long concurrency=0, long long limit_max=0, long long limit_duration=0,
                  int lanes=ANY, object affinity=None):
        if concurrency < 0 or limit_max < 0 or limit_duration < 0:
            raise ValueError("group defaults must not be negative")
        if (limit_max == 0) != (limit_duration == 0):
            raise ValueError("a rate limit needs both max and duration")
        if lanes not in (ANY, ONE, NONE):
            raise ValueError(f"unknown lane selection {lanes}")
        if (lanes == ONE) != (affinity is not None):
            raise ValueError("affinity names a group exactly when one lane is selected")
        if affinity is not None and type(affinity) is not str:
            raise TypeError("affinity must be a str")
        self.concurrency = concurrency
        self.limit_max = limit_max
        self.limit_duration = limit_duration
        self.lanes = lanes
        self.affinity = affinity


cdef GroupClaim NO_DEFAULTS = GroupClaim()


cdef class GroupScheduler:
    """The lanes of one queue, served round-robin from a cursor; see groups.pxd."""

    def __cinit__(self):
        self._lanes = {}
        self._cursor = None
        self.retry_at = 0.0

    def __len__(self):
        return self._pending

    @property
    def ready_count(self):
        """Grouped jobs ready to be claimed (paused or limited lanes included)."""
        return self._ready

    @property
    def lane_count(self):
        return len(self._lanes)

    # -- jobs --------------------------------------------------------------------------------------

    def add(self, str job_id not None, str group_id not None, double priority, unsigned long long seq):
        """A ready job joins its lane; lower `priority` first, then lower `seq`."""
        cdef GroupLane lane = self._lane(group_id)
        # The ready queue ranks higher priorities first; lanes want the lowest first.
        lane.ready.push(job_id, -priority, False, 0.0, seq)
        if not lane.in_rotation:
            self._join_rotation(lane)
        self._ready += 1
        self._pending += 1

    def add_delayed(self, str group_id not None):
        """A delayed job of the group: it counts toward the group's depth until it is promoted."""
        cdef GroupLane lane = self._lane(group_id)
        lane.delayed += 1
        self._pending += 1

    def promote(self, str job_id not None, str group_id not None, double priority, unsigned long long seq):
        """A delayed job of the group became ready."""
        cdef GroupLane lane = self._lanes.get(group_id)
        if lane is not None and lane.delayed > 0:
            lane.delayed -= 1
            self._pending -= 1
        self.add(job_id, group_id, priority, seq)

    def remove(self, job_id, group_id, double now):
        """Take a ready job out of its lane; False if it was not there."""
        cdef GroupLane lane = self._lanes.get(group_id)
        if lane is None or not lane.ready.remove(job_id):
            return False
        self._ready -= 1
        self._pending -= 1
        if not lane.ready:
            self._leave_rotation(lane)
            self._drop_if_idle(lane, now)
        return True

    def remove_delayed(self, group_id, double now=0.0):
        """A delayed job of the group left (promoted, cancelled); False if none was counted."""
        cdef GroupLane lane = self._lanes.get(group_id)
        if lane is None or lane.delayed == 0:
            return False
        lane.delayed -= 1
        self._pending -= 1
        self._drop_if_idle(lane, now)
        return True

    def claim(self, double now, GroupClaim claim=None):
        """The id of the next job to run under `claim`'s defaults, or None; the job counts as active.

        Visits lanes from the cursor and takes from the first eligible one. When nothing is taken,
        ``retry_at`` is the earliest time a skipped lane becomes eligible by itself (0: none will).
        """
        cdef GroupLane lane
        cdef Py_ssize_t visits
        cdef double until, retry = 0.0
        if claim is None:
            claim = NO_DEFAULTS
        self.retry_at = 0.0
        if claim.lanes == NONE:
            return None
        if claim.lanes == ONE:
            lane = self._lanes.get(claim.affinity)
            visits = 1 if lane is not None and lane.in_rotation else 0
        else:
            lane = self._cursor
            visits = self._rotation_size
        while visits > 0:
            until = self._blocked_until(lane, now, claim)
            if until == 0.0:
                return self._take(lane, now, claim)
            if until > 0.0 and (retry == 0.0 or until < retry):
                retry = until
            lane = lane.next
            visits -= 1
        self.retry_at = retry
        return None

    def unclaim(self, str group_id not None, double now):
        """Undo the last claim from the group (its job was dropped instead of run: ttl expired)."""
        cdef GroupLane lane = self._lanes.get(group_id)
        if lane is None or lane.active == 0:
            return
        lane.active -= 1
        if lane.window_max != 0 and lane.window_count > 0:
            lane.window_count -= 1
        self._drop_if_idle(lane, now)

    def release(self, str group_id not None, double now):
        """An active job of the group stopped running. True when the group has ready jobs waiting."""
        cdef GroupLane lane = self._lanes.get(group_id)
        if lane is None or lane.active == 0:
            return False
        lane.active -= 1
        if lane.in_rotation:
            return True
        self._drop_if_idle(lane, now)
        return False

    def depth(self, group_id):
        """Waiting, prioritized and delayed jobs of the group (not the active ones)."""
        cdef GroupLane lane = self._lanes.get(group_id)
        return 0 if lane is None else len(lane.ready) + lane.delayed

    def active_count(self, group_id):
        cdef GroupLane lane = self._lanes.get(group_id)
        return 0 if lane is None else lane.active

    def has_ready(self, group_id):
        cdef GroupLane lane = self._lanes.get(group_id)
        return lane is not None and lane.in_rotation

    def ids(self):
        """Every ready grouped job id, in no particular order."""
        cdef GroupLane lane
        out = []
        for lane in self._lanes.values():
            out.extend(lane.ready.ids())
        return out

    def rotation(self):
        """Group ids with ready jobs, starting at the cursor: the order the next claims visit them."""
        cdef GroupLane lane = self._cursor
        out = []
        for _ in range(self._rotation_size):
            out.append(lane.group_id)
            lane = lane.next
        return out

    def clear(self, double now):
        """Forget every waiting and delayed job (Drain, Obliterate); active counts and controls stay."""
        cdef GroupLane lane
        for lane in list(self._lanes.values()):
            if lane.in_rotation:
                self._leave_rotation(lane)
            lane.ready.clear()
            lane.delayed = 0
            self._drop_if_idle(lane, now)
        self._pending = self._ready = 0

    # -- controls ----------------------------------------------------------------------------------

    def set_concurrency(self, str group_id not None, long long concurrency):
        if concurrency <= 0:
            raise ValueError("concurrency must be positive")
        self._lane(group_id).concurrency = concurrency

    def concurrency(self, group_id):
        """The stored override, or None."""
        cdef GroupLane lane = self._lanes.get(group_id)
        return None if lane is None or lane.concurrency == 0 else lane.concurrency

    def remove_concurrency(self, group_id, double now):
        cdef GroupLane lane = self._lanes.get(group_id)
        if lane is None or lane.concurrency == 0:
            return False
        lane.concurrency = 0
        self._drop_if_idle(lane, now)
        return True

    def set_rate_limit(self, str group_id not None, long long max_jobs, long long duration):
        """Store a rate override; the group's open window closes (the next claim opens a new one)."""
        if max_jobs <= 0 or duration <= 0:
            raise ValueError("max and duration must be positive")
        cdef GroupLane lane = self._lane(group_id)
        lane.rate_max = max_jobs
        lane.rate_duration = duration
        lane.window_max = 0

    def rate_limit(self, group_id):
        """The stored override as (max, duration), or None."""
        cdef GroupLane lane = self._lanes.get(group_id)
        return None if lane is None or lane.rate_max == 0 else (lane.rate_max, lane.rate_duration)

    def remove_rate_limit(self, group_id, double now):
        cdef GroupLane lane = self._lanes.get(group_id)
        if lane is None:
            return False
        lane.window_max = 0
        removed = lane.rate_max != 0
        lane.rate_max = lane.rate_duration = 0
        self._drop_if_idle(lane, now)
        return removed

    def rate_limit_ttl(self, group_id, double now, long long max_jobs=-1):
        """Ms until the group may be claimed from again by its deadline or window; -2 when neither.

        With ``max_jobs`` >= 0 an open window with fewer claims than that answers 0.
        """
        cdef GroupLane lane = self._lanes.get(group_id)
        if lane is None:
            return NO_WINDOW_TTL
        if now < lane.manual_until:
            return lane.manual_until - now
        if lane.window_max == 0 or now >= lane.window_start + lane.window_duration:
            return NO_WINDOW_TTL
        if max_jobs >= 0 and lane.window_count < max_jobs:
            return 0.0
        return lane.window_start + lane.window_duration - now

    def limit_until(self, str group_id not None, double until):
        """RateLimitGroup: no claim from the group before `until`, whatever the pull's defaults."""
        self._lane(group_id).manual_until = until

    def pause(self, str group_id not None):
        """True if the group was not paused before."""
        cdef GroupLane lane = self._lane(group_id)
        if lane.paused:
            return False
        lane.paused = True
        return True

    def resume(self, group_id, double now):
        """True if the group was paused."""
        cdef GroupLane lane = self._lanes.get(group_id)
        if lane is None or not lane.paused:
            return False
        lane.paused = False
        self._drop_if_idle(lane, now)
        return True

    def is_paused(self, group_id):
        cdef GroupLane lane = self._lanes.get(group_id)
        return lane is not None and lane.paused

    def controls(self, group_id):
        """The stored controls (concurrency, rate max, rate duration, paused), zeros for none; None
        when the group has none at all."""
        cdef GroupLane lane = self._lanes.get(group_id)
        if lane is None or not lane._has_controls():
            return None
        return (lane.concurrency, lane.rate_max, lane.rate_duration, lane.paused)

    def restore_controls(self, str group_id not None, long long concurrency, long long rate_max,
                         long long rate_duration, bint paused):
        """Controls read back from storage."""
        if concurrency < 0 or rate_max < 0 or rate_duration < 0 or (rate_max == 0) != (rate_duration == 0):
            raise ValueError("invalid stored group controls")
        cdef GroupLane lane = self._lane(group_id)
        lane.concurrency = concurrency
        lane.rate_max = rate_max
        lane.rate_duration = rate_duration
        lane.paused = paused

    def controlled_groups(self):
        """Group ids with stored controls."""
        cdef GroupLane lane
        return [lane.group_id for lane in self._lanes.values() if lane._has_controls()]

    def forget_controls(self, double now):
        """Obliterate: every control and runtime window goes."""
        cdef GroupLane lane
        for lane in list(self._lanes.values()):
            lane.concurrency = lane.rate_max = lane.rate_duration = 0
            lane.paused = False
            lane.manual_until = 0.0
            lane.window_max = 0
            self._drop_if_idle(lane, now)

    # -- internals ---------------------------------------------------------------------------------

    cdef GroupLane _lane(self, str group_id):
        cdef GroupLane lane = self._lanes.get(group_id)
        if lane is None:
            lane = GroupLane(group_id)
            self._lanes[group_id] = lane
        return lane

    cdef void _join_rotation(self, GroupLane lane) noexcept:
        cdef GroupLane cursor = self._cursor
        lane.in_rotation = True
        self._rotation_size += 1
        if cursor is None:
            lane.next = lane.prev = lane
            self._cursor = lane
            return
        # Just behind the cursor: the last lane the current round visits.
        lane.prev = cursor.prev
        lane.next = cursor
        cursor.prev.next = lane
        cursor.prev = lane

    cdef void _leave_rotation(self, GroupLane lane) noexcept:
        if not lane.in_rotation:
            return
        lane.in_rotation = False
        self._rotation_size -= 1
        if self._rotation_size == 0:
            self._cursor = None
        else:
            if self._cursor is lane:
                self._cursor = lane.next
            lane.prev.next = lane.next
            lane.next.prev = lane.prev
        # No cycle of references is left behind.
        lane.next = lane.prev = None

    cdef void _drop_if_idle(self, GroupLane lane, double now):
        if lane._idle(now):
            del self._lanes[lane.group_id]

    cdef double _blocked_until(self, GroupLane lane, double now, GroupClaim claim):
        cdef long long limit, max_jobs, duration
        if lane.paused:
            return -1.0
        if lane.manual_until != 0.0:
            if now < lane.manual_until:
                return lane.manual_until
            lane.manual_until = 0.0
        if claim.concurrency != 0:
            limit = lane.concurrency if lane.concurrency != 0 else claim.concurrency
            if lane.active >= limit:
                return -1.0
        if claim.limit_max == 0 or lane.window_max == 0:
            return 0.0
        if lane.rate_max != 0:
            max_jobs, duration = lane.rate_max, lane.rate_duration
        else:
            max_jobs, duration = claim.limit_max, claim.limit_duration
        if (now >= lane.window_start + lane.window_duration or lane.window_max != max_jobs
                or lane.window_duration != duration):
            # The window ran out or the limit changed: the next claim opens a new one.
            lane.window_max = 0
            return 0.0
        if lane.window_count >= max_jobs:
            return lane.window_start + lane.window_duration
        return 0.0

    cdef object _take(self, GroupLane lane, double now, GroupClaim claim):
        job_id = lane.ready.pop()
        self._ready -= 1
        self._pending -= 1
        lane.active += 1
        if claim.limit_max != 0:
            if lane.window_max == 0:
                if lane.rate_max != 0:
                    lane.window_max, lane.window_duration = lane.rate_max, lane.rate_duration
                else:
                    lane.window_max, lane.window_duration = claim.limit_max, claim.limit_duration
                lane.window_start = now
                lane.window_count = 0
            lane.window_count += 1
        self._cursor = lane.next
        if not lane.ready:
            self._leave_rotation(lane)
        return job_id
