-- SPDX-License-Identifier: BSD-3-Clause
-- A fair lock waiter's ticket, phase 1: this node's candidate. Changes
-- nothing; fair_acquire.lua records the ticket chosen when it queues.
--
-- KEYS[1]  our waiters' tickets, redlock_fair:{NAME} (see fair_acquire.lua)
-- (no ARGV)
--
-- The client asks every member and takes the largest candidate of a
-- quorum, T, and queues with T. A waiter that asks after an earlier one
-- queued on a quorum meets one of those nodes, so its ticket is larger:
-- tickets follow arrival order, and since every node puts first the
-- smallest (ticket, field), every node agrees on who comes first.
--
-- Returns the candidate max(largest ticket queued + 1, node time in us),
-- as a string.
local t = redis.call('time')
local top = redis.call('zrange', KEYS[1], -1, -1, 'withscores')
local seq = tonumber(top[2] or '0')
return string.format('%.0f', math.max(seq + 1, tonumber(t[1]) * 1000000 + tonumber(t[2])))
