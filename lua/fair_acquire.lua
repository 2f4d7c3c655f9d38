-- SPDX-License-Identifier: BSD-3-Clause
-- Acquire or re-enter a fair lock: first come, first served (Redisson
-- RFairLock layout, with a ticket order the same on every node).
--
-- KEYS[1]  lock name: the plain lock's hash (see acquire.lua)
-- KEYS[2]  this request's cancel mark (as acquire.lua's)
-- KEYS[3]  the queue, redisson_lock_queue:{NAME}: waiters' fields, head
--          first
-- KEYS[4]  the queue's timeouts, redisson_lock_timeout:{NAME}: when each
--          Redisson waiter's place lapses (by its client's clock). Ours get
--          their own lapse plus 600 s there: a Redisson grant takes its
--          fairLockWaitTimeout (300 s by default) off every entry, which
--          must not make our waiters look dead to Redisson's clients
-- KEYS[5]  our waiters' tickets, redlock_fair:{NAME}: a sorted set of
--          fields scored by ticket (fair_ticket.lua)
-- KEYS[6]  when our waiters' places lapse, redlock_fairlapse:{NAME}: a
--          sorted set of fields scored by ms of the node's clock; a
--          negative score -L is no place but a grant's receipt (below)
-- KEYS[7]  (optional) fencing token key, redisson_lock_token:{NAME}
-- ARGV[1]  lease in ms
-- ARGV[2]  owner field <client-id>:<owner-id>
-- ARGV[3]  this request's id (as acquire.lua's)
-- ARGV[4]  "1": the client holds nothing through this handle; "0" re-entry
-- ARGV[5]  the waiter's ticket (decimal), or "" for a first try that does
--          not queue
-- ARGV[6]  how long a waiter's place lasts without a renewal (ms)
--
-- Who is first: the queue's head if it is a waiter without a ticket (a
-- Redisson client's, on one node), else the waiter with the smallest
-- (ticket, field). That order is the same on every node whatever the
-- arrival order there, so no two waiters can each be first on part of a
-- quorum. The list is kept in the same order for Redisson's sake. A
-- waiter's every attempt renews its place (or puts it back by its
-- ticket, replacing a place of the same owner's earlier wait, which
-- never makes this wait first); places whose time lapsed leave first, as
-- in Redisson (entries without a timeout too). The lock is granted when it is free and nobody
-- else is first; the grant takes the caller out of the queue, leaving in
-- KEYS[6] its lapse L scored -L: the receipt an abort of this grant needs
-- to give the place back (fair_abort.lua), with (for a waiter with a
-- ticket) the member <field>#<ticket>, also scored -L, naming the wait it
-- is for. A leave of that wait or a release drops both, so an abort that
-- lands after them cannot make a place for a waiter that is gone.
--
-- Returns as acquire.lua: {token, generation} held; when refused, the
-- holder's PTTL, or while the lock is free but another waiter is first,
-- the ms until that waiter's place lapses; -3 cancelled or a late copy.
-- A refused try without a ticket answers {that number, 't', candidate}:
-- this node's ticket candidate as fair_ticket.lua computes it, so a
-- waiter refused by a quorum has its ticket without another round.
-- One call tells the usual free lock from the rest: neither the cancel
-- mark nor the lock exists.
local present = redis.call('exists', KEYS[2], KEYS[1]) > 0
if present and redis.call('exists', KEYS[2]) == 1 then return -3 end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- A refusal; without a ticket it carries this node's candidate (the
-- arithmetic is fair_ticket.lua's).
local function refuse(v)
    if ARGV[5] ~= '' then return v end
    local top = redis.call('zrange', KEYS[5], -1, -1, 'withscores')
    local seq = tonumber(top[2] or '0')
    return {v, 't', string.format('%.0f', math.max(seq + 1,
            tonumber(t[1]) * 1000000 + tonumber(t[2])))}
end
-- Takes field out of the queue: its list entry, timeout and ticket (its
-- lapse is the caller's to drop or to keep as a receipt).
local function unlist(field)
    redis.call('lrem', KEYS[3], 0, field)
    redis.call('zrem', KEYS[4], field)
    redis.call('zrem', KEYS[5], field)
end
--@include lib/fair_queue.lua
local function enqueue()
    if ARGV[5] == '' then return end
    local lapse = now + tonumber(ARGV[6])
    local queued = redis.call('zscore', KEYS[5], ARGV[2])
    if queued and tonumber(queued) ~= tonumber(ARGV[5]) then
        -- The owner's last wait's place, whose leave has not landed here
        -- yet: this wait queues by its own ticket, so that leave, when it
        -- lands, finds another ticket and spares this place.
        unlist(ARGV[2])
    elseif queued and redis.call('lpos', KEYS[3], ARGV[2]) then
        -- Queued already, unless a Redisson client's script dropped the
        -- list entry (its stale-waiter loop does, once its own grants have
        -- taken their wait off every timeout): then the place goes back
        -- in order, below.
        redis.call('zadd', KEYS[6], lapse, ARGV[2])
        lapses_outlive(KEYS[6], lapse, now)
        redis.call('zadd', KEYS[4], lapse + 600000, ARGV[2])
        return
    end
    -- A new place replaces a receipt of this field (a grant here whose
    -- release never came): its ticket member goes with it, or nothing
    -- would drop that member but a sweep after some later enqueue.
    local receipt = tonumber(redis.call('zscore', KEYS[6], ARGV[2]) or '')
    if receipt and receipt < 0 then
        for _, m in ipairs(redis.call('zrangebyscore', KEYS[6], receipt, receipt)) do
            if string.sub(m, 1, #ARGV[2] + 1) == ARGV[2] .. '#' then
                redis.call('zrem', KEYS[6], m)
            end
        end
    end
    -- From the tail, pass the waiters whose (ticket, field) is after ours;
    -- an entry without a ticket (a Redisson waiter) stays ahead.
    local ticket = tonumber(ARGV[5])
    local len = redis.call('llen', KEYS[3])
    local pivot = nil
    for i = len - 1, math.max(len - 1000, 0), -1 do
        local other = redis.call('lindex', KEYS[3], i)
        local theirs = tonumber(redis.call('zscore', KEYS[5], other) or '')
        if other == ARGV[2] then
            -- An entry of ours without a ticket (its ticket set was lost,
            -- say to eviction): it goes, or the field would be listed
            -- twice. (Entries below i keep their indices.)
            redis.call('lrem', KEYS[3], 0, ARGV[2])
        elseif not theirs or theirs < ticket or (theirs == ticket and other < ARGV[2]) then
            pivot = other
            break
        else
            pivot = false
        end
    end
    if pivot then
        redis.call('linsert', KEYS[3], 'after', pivot, ARGV[2])
    elseif pivot == false then
        redis.call('lpush', KEYS[3], ARGV[2])
    else
        redis.call('rpush', KEYS[3], ARGV[2])
    end
    redis.call('zadd', KEYS[6], lapse, ARGV[2])
    lapses_outlive(KEYS[6], lapse, now)
    redis.call('zadd', KEYS[4], lapse + 600000, ARGV[2])
    redis.call('zadd', KEYS[5], ARGV[5], ARGV[2])
    -- Receipts whose place would have lapsed by now are of no use to an
    -- abort; those of holders that never released go here, once per new
    -- place rather than once per grant.
    redis.call('zremrangebyscore', KEYS[6], '(' .. -now, 0)
end
local genf = ARGV[2] .. ':gen'
if present then
    local h = redis.call('hmget', KEYS[1], ARGV[2], genf, 'mode')
    if not h[1] or h[3] then
        enqueue()
        return refuse(redis.call('pttl', KEYS[1]))
    end
--@include lib/gens.lua
    local v = h[2] or ''
    local gen = gen_of(v)
    if gen == ARGV[3] then
        local tok = 0
        if #KEYS >= 7 then tok = tonumber(redis.call('get', KEYS[7]) or '0') end
        return {tok, gen}
    end
    local seq = string.sub(ARGV[3], 1, 12)
    if gen_applied(v, seq) then return {0, gen} end
    if ARGV[4] ~= '1' then
        redis.call('hset', KEYS[1], ARGV[2], tonumber(h[1]) + 1, genf, gen_apply(v, gen, seq))
        redis.call('pexpire', KEYS[1], ARGV[1])
        return {0, gen}
    end
    if gen_newer_than(gen, seq) then
        redis.call('set', KEYS[2], 'x', 'px', ARGV[1])
        return -3
    end
    -- A leftover of an earlier attempt or hold (see acquire.lua).
    redis.call('hdel', KEYS[1], ARGV[2], genf)
    if redis.call('exists', KEYS[1]) == 1 then
        enqueue()
        return refuse(redis.call('pttl', KEYS[1]))
    end
end
-- Who is first, counting the caller by its ticket whether or not it is
-- queued here: a waiter whose ticket is smaller than the first one's must
-- be first at once, or both could be refused while the lock is free, with
-- nobody left to wake. Only a refused caller queues (or renews); a
-- granted one leaves its place.
local first, lapse, dropped, theirs = first_waiter(KEYS[3], KEYS[4], KEYS[5], KEYS[6], now)
local ticket = tonumber(ARGV[5])
if first == ARGV[2] and (ticket and theirs ~= ticket or not ticket and ARGV[4] == '1') then
    -- First by the place of the owner's earlier wait (its leave has not
    -- landed here yet), not by this wait's ticket (a fresh try has none:
    -- any place of its field is an earlier wait's): that place goes, and
    -- the first is found again, and woken if it is not the caller.
    unlist(first)
    redis.call('zrem', KEYS[6], first)
    local _
    first, lapse, _, theirs = first_waiter(KEYS[3], KEYS[4], KEYS[5], KEYS[6], now)
    dropped = true
end
if first and first ~= ARGV[2] then
    -- A caller without a ticket is behind every waiter, and so is one
    -- with a ticket behind a Redisson waiter (theirs nil: no ticket).
    if not ticket or not theirs or theirs < ticket or (theirs == ticket and first < ARGV[2]) then
        -- The lock is free and the head just left: a waiter that died
        -- after the last release woke it. Nobody has woken the new first
        -- (a Redisson waiter would sleep out the dead one's timeout, ours
        -- until its renewal): wake it now, on its channel (the queue's
        -- name with the channel's prefix).
        if dropped then
            redis.call('publish', 'redisson_lock__channel' .. string.sub(KEYS[3], 20) .. ':' ..
                       first, '0')
        end
        enqueue()
        return refuse(math.max(math.min(lapse - now, tonumber(ARGV[6])), 0))
    end
elseif first then
    unlist(first)
    -- The receipt, and beside it (same score, so the sweep in enqueue()
    -- takes both) which wait it is for: a late leave of the owner's
    -- earlier wait must not drop it (fair_leave.lua).
    if ARGV[5] ~= '' then
        redis.call('zadd', KEYS[6], -lapse, first, -lapse, first .. '#' .. ARGV[5])
    else
        redis.call('zadd', KEYS[6], -lapse, first)
    end
end
redis.call('hset', KEYS[1], ARGV[2], 1, genf, ARGV[3])
redis.call('pexpire', KEYS[1], ARGV[1])
if #KEYS < 7 then return {0, ARGV[3]} end
local stored = tonumber(redis.call('get', KEYS[7]) or '0')
local token = math.max(stored + 1, tonumber(t[1]) * 1000000 + tonumber(t[2]))
redis.call('set', KEYS[7], string.format('%.0f', token))
return {token, ARGV[3]}
