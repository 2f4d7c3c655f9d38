-- SPDX-License-Identifier: BSD-3-Clause
-- Undo one fair acquire request whose outcome the client does not know
-- (abort.lua's rules). A waiter that goes on waiting passes its ticket: an
-- undone grant had taken its place out of the queue, and the place goes
-- back where the ticket puts it, so the waiter stays first and nobody
-- behind it is woken for a grant that must go to it. Without a ticket an
-- undone grant wakes the next waiter.
-- Only the grant's receipt (fair_acquire.lua) gives a place back, with the
-- lapse it had: an abort can land long after it was sent (a frozen node,
-- the background queue), when the waiter has left or been served, and a
-- ticket alone would then queue a waiter that is gone, ahead of the live
-- ones, until its place lapsed. A grant to a waiter that was not queued
-- here leaves no receipt, and its abort queues nobody.
--
-- KEYS[1]  lock name
-- KEYS[2]  release channel prefix, redisson_lock__channel:{NAME}
-- KEYS[3]  the acquire request's cancel mark, redlock_latch:{NAME}:<its id>
-- KEYS[4]  the queue, redisson_lock_queue:{NAME}
-- KEYS[5]  the queue's timeouts, redisson_lock_timeout:{NAME}
-- KEYS[6]  our waiters' tickets, redlock_fair:{NAME}
-- KEYS[7]  when our waiters' places lapse, redlock_fairlapse:{NAME}
-- ARGV[1]  release message ("0")
-- ARGV[2]  lease in ms: how long the mark stays
-- ARGV[3]  owner field <client-id>:<owner-id>
-- ARGV[4]  the waiter's ticket when it goes on waiting, else ""
--
-- Returns 0 nothing to undo (or a replay), 1 the grant was undone.
--@include lib/fair_queue.lua
-- Drops the holder's receipt (scored -L, fair_acquire.lua) with its
-- <field>#<ticket> member of the same score, in one call: whatever else
-- has exactly that score is another owner's receipt, and while this
-- owner holds the lock here that receipt's grant is gone (expired or
-- undone), so no abort can use it any more.
local function drop_receipt(lapses, score)
    redis.call('zremrangebyscore', lapses, score, score)
end
if not redis.call('set', KEYS[3], 'x', 'nx', 'px', ARGV[2]) then return 0 end
local genf = ARGV[3] .. ':gen'
local h = redis.call('hmget', KEYS[1], ARGV[3], genf)
if not h[1] then return 0 end
local id = string.sub(KEYS[3], -32)
local v = h[2] or ''
--@include lib/gens.lua
local gen = gen_of(v)
if gen ~= id and not gen_applied(v, string.sub(id, 1, 12)) then
    return 0
end
local count = tonumber(h[1])
if count > 1 then
    redis.call('hset', KEYS[1], ARGV[3], count - 1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 1
end
redis.call('del', KEYS[1])
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local receipt = tonumber(redis.call('zscore', KEYS[7], ARGV[3]) or '')
if receipt and receipt < 0 then drop_receipt(KEYS[7], receipt) end
if ARGV[4] ~= '' and receipt and -receipt > now then
    -- Back in ticket order (fair_acquire.lua's enqueue): after the last
    -- entry that is a Redisson waiter's or has a smaller (ticket, field).
    local ticket = tonumber(ARGV[4])
    local len = redis.call('llen', KEYS[4])
    local pivot = nil
    for i = len - 1, math.max(len - 1000, 0), -1 do
        local other = redis.call('lindex', KEYS[4], i)
        local theirs = tonumber(redis.call('zscore', KEYS[6], other) or '')
        if not theirs or theirs < ticket or (theirs == ticket and other < ARGV[3]) then
            pivot = other
            break
        end
        pivot = false
    end
    if pivot then
        redis.call('linsert', KEYS[4], 'after', pivot, ARGV[3])
    elseif pivot == false then
        redis.call('lpush', KEYS[4], ARGV[3])
    else
        redis.call('rpush', KEYS[4], ARGV[3])
    end
    local lapse = -receipt
    redis.call('zadd', KEYS[7], lapse, ARGV[3])
    lapses_outlive(KEYS[7], lapse, now)
    redis.call('zadd', KEYS[5], lapse + 600000, ARGV[3])
    redis.call('zadd', KEYS[6], ARGV[4], ARGV[3])
end
local first = first_waiter(KEYS[4], KEYS[5], KEYS[6], KEYS[7], now)
if first and first ~= ARGV[3] then redis.call('publish', KEYS[2] .. ':' .. first, ARGV[1]) end
return 1
