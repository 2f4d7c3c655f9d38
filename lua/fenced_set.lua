-- SPDX-License-Identifier: BSD-3-Clause
-- A write to a protected resource that only the newest lock holder may make.
--
-- KEYS[1]  resource: a hash with fields "value" and "fence_token"
-- ARGV[1]  new value
-- ARGV[2]  the writer's fencing token (decimal)
--
-- Returns 1 if written (token >= every token accepted before), or
-- {0, highest accepted token} if the token is stale and nothing changed.
local accepted = tonumber(redis.call('hget', KEYS[1], 'fence_token') or '0')
local token = tonumber(ARGV[2])
if token < accepted then
    return {0, string.format('%.0f', accepted)}
end
redis.call('hset', KEYS[1], 'value', ARGV[1], 'fence_token', ARGV[2])
return 1
