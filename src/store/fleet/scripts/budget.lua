-- One call on a key's retry budget (gRPC's retryThrottling, in thousandths of a token): a
-- failure costs 1000, a success gives back the ratio, never below 0 nor above the maximum.
-- A budget never used is full.
-- KEYS[1]: the budget's hash; KEYS[2]: the set of budget keys.
-- ARGV: op (check, failure, success), max (thousandths), ratio (thousandths), the key.
local max, ratio = tonumber(ARGV[2]), tonumber(ARGV[3])
local t = tonumber(redis.call('HGET', KEYS[1], 'milli')) or max
if t > max then t = max end
if t < 0 then t = 0 end
if ARGV[1] == 'failure' then
  t = math.max(0, t - 1000)
elseif ARGV[1] == 'success' then
  t = math.min(max, t + ratio)
end
if ARGV[1] ~= 'check' then
  redis.call('HSET', KEYS[1], 'milli', t)
  redis.call('SADD', KEYS[2], ARGV[4])
end
return t
