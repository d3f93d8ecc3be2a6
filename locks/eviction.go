package locks

// Every lockgate key has a TTL (a lock's hash expires with its lease, its
// fencing counter after RedisOptions.FenceRetention), so under any
// volatile-* policy, as under any allkeys-* one, a Redis short of memory
// deletes live locks, and the next caller gets a lock someone still holds.
// Only noeviction, which refuses writes instead, keeps the promise.
const SafePolicy = "noeviction"
