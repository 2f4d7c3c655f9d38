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

-- The lapses set must not stay for ever after the last waiter (it may
-- die, and a holder may never release, leaving its receipt). (A dead
-- waiter's entries in the queue, the timeouts and the tickets stay until
-- the next fair call on the name sweeps them, as in Redisson.) The
-- lapses set is written only with a place, whose lapse is at most the
-- wait lease away, and a receipt keeps that place's lapse: so it is given
-- a TTL past the lapse of every place written to it, by as long again as
-- Redisson's timeout entries of ours outlive their lapse (600 s, see
-- fair_acquire.lua) and a second more. A live waiter renews its place,
-- and so the set, long before that. When the set goes, the lapse of every
-- place it held has passed, and so has the timeout entry first_waiter()
-- would fall back to: nothing of ours can look alive without its lapse.
local function lapses_outlive(lapses, lapse, now)
    local ms = lapse - now + 601000
    if redis.call('pexpire', lapses, ms, 'GT') == 0 then
        -- No TTL yet (GT counts none as infinite), or a longer one.
        redis.call('pexpire', lapses, ms, 'NX')
    end
end
