-- One call on a key's permits: its leases are a sorted set of lease ids scored by when they
-- run out (ms, by the server's clock: `TIME` here, never a client's, so a host whose clock is
-- wrong can neither take a live lease nor keep one longer). Expired leases are swept first
-- (except by `status`, which only looks), so a holder that died frees its slot with no one's
-- help; the grant and the count are one step, so racing hosts never hold more than `max`.
-- KEYS[1]: the key's sorted set; KEYS[2]: the set of permit keys.
-- ARGV: op (acquire, renew, release, status), lease id, max, lease ms, the key.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local op, id = ARGV[1], ARGV[2]
local max, lease = tonumber(ARGV[3]), tonumber(ARGV[4])
local done, expires = 0, 0
if op == 'status' then
  local held = redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
  local reply = {0, 0, now, held}
  local leases = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 100)
  for i = 1, #leases do
    reply[#reply + 1] = leases[i]
  end
  return reply
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if op == 'acquire' then
  if redis.call('ZCARD', KEYS[1]) < max then
    expires = now + lease
    redis.call('ZADD', KEYS[1], expires, id)
    redis.call('SADD', KEYS[2], ARGV[5])
    done = 1
  end
elseif op == 'renew' then
  local was = redis.call('ZSCORE', KEYS[1], id)
  if was then
    expires = math.max(now + lease, math.floor(tonumber(was)))
    redis.call('ZADD', KEYS[1], 'XX', expires, id)
    done = 1
  end
elseif op == 'release' then
  done = redis.call('ZREM', KEYS[1], id)
end
local held = redis.call('ZCARD', KEYS[1])
if held == 0 then
  redis.call('DEL', KEYS[1])
else
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', KEYS[1], math.floor(tonumber(last[2])) + 1000)
end
local reply = {done, expires, now, held}
local leases = redis.call('ZRANGE', KEYS[1], 0, 99, 'WITHSCORES')
for i = 1, #leases do
  reply[#reply + 1] = leases[i]
end
return reply
