-- SPDX-License-Identifier: BSD-3-Clause
-- Acquire or re-enter a fair lock: first come, first served (Redisson
-- RFairLock layout, with a ticket order the same on every node).
--
-- KEYS[1]  lock name: the plain lock's hash (see acquire.lua)
-- KEYS[2]  this request's cancel mark (as acquire.lua's)
-- KEYS[3]  the queue, redisson_lock_queue:{NAME}: waiters' fields, head
--          first
-- KEYS[4]  the queue's timeouts, redisson_lock_timeout:{NAME}: when each
--          waiter's place lapses (ms of the node's clock for our waiters)
-- KEYS[5]  our waiters' tickets, redlock_fair:{NAME}: field -> ticket, and
--          ":seq" -> the largest ticket enqueued here (fair_ticket.lua);
--          it expires two place lengths after the last queueing
-- KEYS[6]  (optional) fencing token key, redisson_lock_token:{NAME}
-- ARGV[1]  lease in ms
-- ARGV[2]  owner field <client-id>:<owner-id>
-- ARGV[3]  this request's id (as acquire.lua's)
-- ARGV[4]  "1": the client holds nothing through this handle; "0" re-entry
-- ARGV[5]  the waiter's ticket (decimal), or "" for a first try that does
--          not queue
-- ARGV[6]  how long a waiter's place lasts without a renewal (ms)
--
-- The queue is kept in (ticket, field) order, so every node has the same
-- head among the waiters it knows; a waiter's every attempt renews its
-- place (or puts it back where its ticket says). Places whose time lapsed
-- leave from the head, as in Redisson (entries without a timeout too). The
-- lock is granted when it is free and the queue is empty or its head is
-- the caller; the grant takes the caller out of the queue.
--
-- Returns as acquire.lua: {token, generation} held; when refused, the
-- holder's PTTL, or while the lock is free but another waiter is first,
-- the ms until that waiter's place lapses; -3 cancelled or a late copy.
if redis.call('exists', KEYS[2]) == 1 then return -3 end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for _ = 1, 100 do
    local first = redis.call('lindex', KEYS[3], 0)
    if not first then break end
    local lapse = redis.call('zscore', KEYS[4], first)
    if lapse and tonumber(lapse) > now then break end
    redis.call('lpop', KEYS[3])
    redis.call('zrem', KEYS[4], first)
    redis.call('hdel', KEYS[5], first)
end
local function enqueue()
    if ARGV[5] == '' then return end
    local lapse = now + tonumber(ARGV[6])
    if redis.call('zscore', KEYS[4], ARGV[2]) then
        redis.call('zadd', KEYS[4], lapse, ARGV[2])
        return
    end
    -- From the tail, pass the waiters whose (ticket, field) is after ours;
    -- an entry without a ticket (a Redisson waiter) stays ahead.
    local ticket = tonumber(ARGV[5])
    local len = redis.call('llen', KEYS[3])
    local pivot = nil
    for i = len - 1, math.max(len - 1000, 0), -1 do
        local other = redis.call('lindex', KEYS[3], i)
        local theirs = tonumber(redis.call('hget', KEYS[5], other) or '')
        if not theirs or theirs < ticket or (theirs == ticket and other < ARGV[2]) then
            pivot = other
            break
        end
        pivot = false
    end
    if pivot then
        redis.call('linsert', KEYS[3], 'after', pivot, ARGV[2])
    elseif pivot == false then
        redis.call('lpush', KEYS[3], ARGV[2])
    else
        redis.call('rpush', KEYS[3], ARGV[2])
    end
    redis.call('zadd', KEYS[4], lapse, ARGV[2])
    redis.call('hset', KEYS[5], ARGV[2], ARGV[5])
    local seq = tonumber(redis.call('hget', KEYS[5], ':seq') or '0')
    if ticket > seq then redis.call('hset', KEYS[5], ':seq', ARGV[5]) end
    -- The tickets outlive the last place by a place's length, then go:
    -- later tickets still grow with the node's clock.
    local keep = 2 * tonumber(ARGV[6])
    if redis.call('pttl', KEYS[5]) < keep then redis.call('pexpire', KEYS[5], keep) end
end
local genf = ARGV[2] .. ':gen'
if redis.call('exists', KEYS[1]) == 1 then
    local h = redis.call('hmget', KEYS[1], ARGV[2], genf, 'mode')
    if not h[1] or h[3] then
        enqueue()
        return redis.call('pttl', KEYS[1])
    end
    local v = h[2] or ''
    local gen = string.match(v, '^[^,]*')
    if gen == ARGV[3] then
        local tok = 0
        if #KEYS >= 6 then tok = tonumber(redis.call('get', KEYS[6]) or '0') end
        return {tok, gen}
    end
    local seq = string.sub(ARGV[3], 1, 12)
    if string.find(v .. ',', ',' .. seq .. ',', 1, true) then return {0, gen} end
    if ARGV[4] ~= '1' then
        local rest = string.sub(v, #gen + 1) .. ',' .. seq
        if #rest > 52 then rest = string.sub(rest, -52) end
        redis.call('hset', KEYS[1], ARGV[2], tonumber(h[1]) + 1, genf, gen .. rest)
        redis.call('pexpire', KEYS[1], ARGV[1])
        return {0, gen}
    end
    if #gen == 32 and tonumber(string.sub(gen, 1, 12), 16) > tonumber(seq, 16) then
        redis.call('set', KEYS[2], 'x', 'px', ARGV[1])
        return -3
    end
    -- A leftover of an earlier attempt or hold (see acquire.lua).
    redis.call('hdel', KEYS[1], ARGV[2], genf)
    if redis.call('exists', KEYS[1]) == 1 then
        enqueue()
        return redis.call('pttl', KEYS[1])
    end
end
local head = redis.call('lindex', KEYS[3], 0)
if head and head ~= ARGV[2] then
    enqueue()
    local lapse = tonumber(redis.call('zscore', KEYS[4], head) or now)
    return math.max(math.min(lapse - now, tonumber(ARGV[6])), 0)
end
if head then redis.call('lpop', KEYS[3]) end
redis.call('zrem', KEYS[4], ARGV[2])
redis.call('hdel', KEYS[5], ARGV[2])
redis.call('hset', KEYS[1], ARGV[2], 1, genf, ARGV[3])
redis.call('pexpire', KEYS[1], ARGV[1])
if #KEYS < 6 then return {0, ARGV[3]} end
local stored = tonumber(redis.call('get', KEYS[6]) or '0')
local token = math.max(stored + 1, tonumber(t[1]) * 1000000 + tonumber(t[2]))
redis.call('set', KEYS[6], string.format('%.0f', token))
return {token, ARGV[3]}
