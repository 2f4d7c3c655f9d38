-- SPDX-License-Identifier: BSD-3-Clause
-- Drop one hold of a fair lock (release.lua's rules) and wake only the
-- next waiter.
--
-- KEYS[1]  lock name (see acquire.lua for its :gen field)
-- KEYS[2]  release channel prefix, redisson_lock__channel:{NAME}: the next
--          waiter listens on <prefix>:<its field>, as in Redisson's RFairLock
-- KEYS[3]  redlock_latch:{NAME}:<this release's id> (as release.lua's)
-- KEYS[4]  the queue, redisson_lock_queue:{NAME}
-- KEYS[5]  the queue's timeouts, redisson_lock_timeout:{NAME}
-- KEYS[6]  our waiters' tickets, redlock_fair:{NAME}
-- KEYS[7]  when our waiters' places lapse, redlock_fairlapse:{NAME}
-- ARGV[1]  release message ("0", as Redisson publishes)
-- ARGV[2]  lease in ms, reset while holds remain
-- ARGV[3]  owner field <client-id>:<owner-id>
-- ARGV[4]  "1": drop every hold of owner at once; "0" not
-- ARGV[5]  generations the hold may have, comma-separated, or ""
--
-- Returns as release.lua: nil not held (cancel marks set), 0 decremented
-- and still held (or a replay of that), 1 released. A release publishes
-- to the first waiter whose place has not lapsed (lapsed places at the
-- head leave first, as when acquiring), and to nobody when none waits.
-- The releasing owner's own place, if one is left (a member where its
-- grant did not take it out), goes too, so its acquire never waits for a
-- separate leave.
--@include lib/fair_queue.lua
-- Drops the owner's receipt (scored -L, fair_acquire.lua) with its
-- <field>#<ticket> member of the same score. After a release (held) in
-- one call: whatever else has exactly that score is another owner's
-- receipt, and while this owner held the lock here that receipt's grant
-- was gone (expired or undone), so no abort can use it any more.
local function drop_receipt(score, held)
    if held then
        redis.call('zremrangebyscore', KEYS[7], score, score)
        return
    end
    for _, m in ipairs(redis.call('zrangebyscore', KEYS[7], score, score)) do
        if m == ARGV[3] or string.sub(m, 1, #ARGV[3] + 1) == ARGV[3] .. '#' then
            redis.call('zrem', KEYS[7], m)
        end
    end
end
-- Leaves the owner's place and wakes the first waiter once the lock is
-- free (deleted: the caller has just deleted it).
local function leave_and_wake(deleted)
    -- A place of ours has its lapse while any part of it is left
    -- (Redisson's scripts drop only the list and timeout entries). A
    -- negative one is only the receipt of the grant that took the place
    -- (fair_acquire.lua): once released, no abort may give that back.
    local lapse = redis.call('zscore', KEYS[7], ARGV[3])
    if lapse and tonumber(lapse) >= 0 then
        redis.call('lrem', KEYS[4], 0, ARGV[3])
        redis.call('zrem', KEYS[5], ARGV[3])
        redis.call('zrem', KEYS[6], ARGV[3])
    end
    if lapse and tonumber(lapse) < 0 then
        drop_receipt(lapse, deleted)
    elseif lapse then
        redis.call('zrem', KEYS[7], ARGV[3])
    end
    if not deleted and redis.call('exists', KEYS[1]) == 1 then return end
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local next = first_waiter(KEYS[4], KEYS[5], KEYS[6], KEYS[7], now)
    if next then redis.call('publish', KEYS[2] .. ':' .. next, ARGV[1]) end
end
local genf = ARGV[3] .. ':gen'
local h = redis.call('hmget', KEYS[1], ARGV[3], genf)
if not h[1] then
    local prefix = string.sub(KEYS[3], 1, -33)
    for id in string.gmatch(ARGV[5], '[^,]+') do
        redis.call('set', prefix .. id, 'x', 'nx', 'px', ARGV[2])
    end
    if redis.call('zscore', KEYS[7], ARGV[3]) then leave_and_wake() end
    return nil
end
local v = h[2] or ''
--@include lib/gens.lua
local gen = gen_of(v)
if gen ~= '' and ARGV[5] ~= '' and
        not string.find(',' .. ARGV[5] .. ',', ',' .. gen .. ',', 1, true) then
    return nil
end
local seq = string.sub(KEYS[3], -32, -21)
if gen_applied(v, seq) then return 0 end
local count = tonumber(h[1])
if ARGV[4] ~= '1' and count > 1 then
    redis.call('hset', KEYS[1], ARGV[3], count - 1, genf, gen_apply(v, gen, seq))
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
redis.call('del', KEYS[1])
leave_and_wake(true)
return 1
