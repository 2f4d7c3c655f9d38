-- SPDX-License-Identifier: BSD-3-Clause
-- A fair lock waiter gives up (its wait ended, it was cancelled or
-- interrupted, or it was granted elsewhere): it leaves the queue at once,
-- and if it was first while the lock is free, the next waiter is woken;
-- so is the new first one when finding the first dropped lapsed places
-- (the dead head a release woke: nobody else would wake the next).
--
-- KEYS[1]  lock name
-- KEYS[2]  release channel prefix, redisson_lock__channel:{NAME}
-- KEYS[3]  the queue, redisson_lock_queue:{NAME}
-- KEYS[4]  the queue's timeouts, redisson_lock_timeout:{NAME}
-- KEYS[5]  our waiters' tickets, redlock_fair:{NAME}
-- KEYS[6]  when our waiters' places lapse, redlock_fairlapse:{NAME}
-- ARGV[1]  release message ("0")
-- ARGV[2]  owner field <client-id>:<owner-id>
-- ARGV[3]  the ticket of the wait that ends, or "" for whatever place the
--          field has
--
-- Returns 1 when the waiter was queued here, 0 when it was not (a replay,
-- or it never got here, or the place is a later wait's).
--@include lib/fair_queue.lua
-- The ticket of the wait field's receipt is for, or nil if it names none.
local function receipt_ticket(lapses, field, score)
    for _, m in ipairs(redis.call('zrangebyscore', lapses, score, score)) do
        if string.sub(m, 1, #field + 1) == field .. '#' then return string.sub(m, #field + 2) end
    end
    return nil
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local first, _, dropped = first_waiter(KEYS[3], KEYS[4], KEYS[5], KEYS[6], now)
-- A leave sent to a silent node is also queued for the background, so
-- the node may run it twice, the second time after the same owner queued
-- again with a later ticket: that place is the later wait's.
local ending = ARGV[3] or ''
local theirs = redis.call('zscore', KEYS[5], ARGV[2])
local ours = ending == '' or not theirs or tonumber(theirs) == tonumber(ending)
local was_first = ours and first == ARGV[2]
local removed = 0
if ours then
    removed = redis.call('lrem', KEYS[3], 0, ARGV[2])
    redis.call('zrem', KEYS[4], ARGV[2])
    redis.call('zrem', KEYS[5], ARGV[2])
    -- Also the receipt of a late grant here (fair_acquire.lua), so that
    -- grant's abort, owed and landing after this, gives no place back;
    -- but only this wait's. A later wait of the owner may have been
    -- granted here before this copy of an earlier leave landed: its
    -- receipt is what gives its place back if that grant is undone. (A
    -- receipt naming no wait, from an older version, goes.)
    local lapse = tonumber(redis.call('zscore', KEYS[6], ARGV[2]) or '')
    if lapse and lapse < 0 then
        local granted = receipt_ticket(KEYS[6], ARGV[2], lapse)
        if ending == '' or not granted or tonumber(granted) == tonumber(ending) then
            redis.call('zrem', KEYS[6], ARGV[2], ARGV[2] .. '#' .. (granted or ''))
        end
    elseif lapse then
        redis.call('zrem', KEYS[6], ARGV[2])
    end
end
if (was_first or dropped) and redis.call('exists', KEYS[1]) == 0 then
    local next = first_waiter(KEYS[3], KEYS[4], KEYS[5], KEYS[6], now)
    if next then redis.call('publish', KEYS[2] .. ':' .. next, ARGV[1]) end
end
if removed > 0 then return 1 end
return 0
