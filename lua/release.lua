-- SPDX-License-Identifier: BSD-3-Clause
-- Drop one hold; delete and publish when the count reaches zero.
--
-- KEYS[1]  lock name (see acquire.lua for its :gen field)
-- KEYS[2]  release channel, redisson_lock__channel:{NAME}
-- KEYS[3]  redlock_latch:{NAME}:<this release's id>: never written; its
--          prefix names the cancel marks below, its id identifies a replay
-- ARGV[1]  release message ("0", as Redisson publishes)
-- ARGV[2]  lease in ms, reset while holds remain
-- ARGV[3]  owner field <client-id>:<owner-id>
-- ARGV[4]  "1": drop every hold of owner at once, whatever the count
--          (cleanup after a loss, or a member whose count drifted); "0" not
-- ARGV[5]  generations the hold being released may have, comma-separated
--          (ids of grants that may have made it), or "" when the caller
--          does not know them
--
-- When owner's field is absent, every listed generation gets the cancel
-- mark redlock_latch:{NAME}:<id> = 'x' for ARGV[2] ms (unless one is there):
-- an acquire of that hold still on its way (sent on another connection to
-- a node that was silent) then cannot grant after this release.
--
-- Returns
--   nil  not held by owner, or held by owner under another generation: a
--        release that arrives late (retried in the background) must not
--        drop a newer hold of the same owner, which it would leave short of
--        a quorum. A hold without a generation (made by a client that
--        writes none, e.g. Redisson) is released as before.
--   0    count decremented, still held (also the answer to a replay of a
--        decrement, recognised by this release's sequence number)
--   1    released (deleted) and published
-- The common path, the last hold, runs HMGET, DEL, PUBLISH.
local genf = ARGV[3] .. ':gen'
local h = redis.call('hmget', KEYS[1], ARGV[3], genf)
if not h[1] then
    local prefix = string.sub(KEYS[3], 1, -33)
    for id in string.gmatch(ARGV[5], '[^,]+') do
        redis.call('set', prefix .. id, 'x', 'nx', 'px', ARGV[2])
    end
    return nil
end
local v = h[2] or ''
-- The common case first: the one hold of its generation (or of an unknown
-- one), with nothing applied to it since that a replay could repeat.
if h[1] == '1' and #v <= 32 and (v == ARGV[5] or ARGV[5] == '') then
    redis.call('del', KEYS[1])
    redis.call('publish', KEYS[2], ARGV[1])
    return 1
end
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
-- The last hold, and a lock has one owner: the key holds nothing else.
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1
