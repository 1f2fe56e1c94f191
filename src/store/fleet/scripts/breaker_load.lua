-- Loads one breaker: its state (JSON, or false when it has none), its version, and the
-- server's clock, so every host applies the machine at the same time source. The key joins
-- the index: a breaker exists once it was first checked or recorded (as its lock file does on
-- one host), so a reset of it makes an older ticket stale.
-- KEYS[1]: the breaker's hash; KEYS[2]: the set of breaker keys. ARGV[1]: the key.
redis.call('SADD', KEYS[2], ARGV[1])
local v = redis.call('HMGET', KEYS[1], 'state', 'version')
local t = redis.call('TIME')
return {v[1] or false, v[2] or '0', t[1], t[2]}
