-- SPDX-License-Identifier: BSD-3-Clause
-- Who is first in a fair lock's queue. Every fair script that grants,
-- wakes or releases asks this one function, so all of them agree on the
-- order that keeps waiters over a quorum from deadlocking (README, "Fair
-- locks"); the build pastes it where a script has the line
-- "--@include lib/fair_queue.lua" (cmake/embed_lua.cmake).
--
-- first_waiter(queue, timeouts, tickets, lapses, now) returns the first
-- waiter whose place has not lapsed by now (ms of this node's clock),
-- dropping lapsed ones on the way, as Redisson's scripts drop stale
-- waiters at the head:
--   1. its field, or nil when nobody waits;
--   2. when its place lapses (ms of this node's clock; a Redisson
--      waiter's by its timeout);
--   3. whether lapsed places were dropped (the caller may then have to
--      wake the new first, whom nobody else would wake);
--   4. its ticket, or nil for a Redisson waiter (no ticket).
-- First is the list's head if that is a Redisson waiter, else the waiter
-- with the least ticket: the list is kept in ticket order, so the head
-- usually is that one, and its ticket need not be looked up.
local function first_waiter(queue, timeouts, tickets, lapses, now)
    local dropped = false
    for _ = 1, 100 do
        local first = redis.call('lindex', queue, 0)
        local least = redis.call('zrange', tickets, 0, 0, 'withscores')
        if not first or first == least[1] or redis.call('zscore', tickets, first) then
            first = least[1] or first
        end
        if not first then return nil, nil, dropped end
        local lapse = redis.call('zscore', lapses, first) or redis.call('zscore', timeouts, first)
        if lapse and tonumber(lapse) > now then
            return first, tonumber(lapse), dropped, first == least[1] and tonumber(least[2]) or nil
        end
        redis.call('lrem', queue, 0, first)
        redis.call('zrem', timeouts, first)
        redis.call('zrem', tickets, first)
        redis.call('zrem', lapses, first)
        dropped = true
    end
    return nil, nil, dropped
end

-- The lapses set lives as long as a member is of use. A place keeps it
-- (whatever writes a place persists it). A receipt (scored -L) is of use
-- until L, the lapse of the place its grant took: with no place left, the
-- set expires with its last receipt, so a holder that never released
-- leaves nothing behind once that lapse is past. A script that removed a
-- place calls this (one call while places remain, as under contention):
-- only that can leave receipts alone in a set without a TTL. A set with
-- no place has its TTL already, which adding or removing a receipt
-- leaves correct enough: a receipt is written only where a place goes.
local function lapses_expire_with_receipts(lapses, now)
    if redis.call('zcount', lapses, 0, '+inf') > 0 then return end
    local lowest = redis.call('zrange', lapses, 0, 0, 'withscores')[2]
    if lowest then redis.call('pexpire', lapses, math.max(-tonumber(lowest) - now, 1)) end
end
