-- Loads one breaker: its state (JSON, or false when it has none), its version, and the
-- server's clock, so every host applies the machine at the same time source.
-- KEYS[1]: the breaker's hash.
local v = redis.call('HMGET', KEYS[1], 'state', 'version')
local t = redis.call('TIME')
return {v[1] or false, v[2] or '0', t[1], t[2]}
