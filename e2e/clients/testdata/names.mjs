// Sends every operation that names a lock or a semaphore (in its path, its
// query or its body) through the generated client, once for each name of
// NAMES in namespace NS. openapi-fetch encodes path parameters with
// encodeURIComponent, so a:b goes as a%3Ab, 50% as 50%25 and café as
// caf%C3%A9. It prints one JSON line per call: the operation, the name,
// the status, the problem's code and detail, and the lock or semaphore
// the answer names. nodeSnippet puts lg (./dist/lockgate.js) and c (a
// client for LOCKGATE_URL with LOCKGATE_TOKEN) in front of it.
const ns = process.env.NS;
const names = JSON.parse(process.env.NAMES);
const notAToken = "not-a-token";
const noTicket = "AAAAAAAAAAAAAAAAAAAAAA"; // a well-formed ticket id

function report(op, name, r, lock) {
  console.log(JSON.stringify({
    op,
    name,
    status: r.response.status,
    code: r.error?.code ?? "",
    detail: r.error?.detail ?? "",
    lock: lock ?? "",
  }));
}

for (const name of names) {
  const path = { namespace: ns, name };
  let r = await c.POST("/locks/{namespace}/{name}", { params: { path }, body: { ttl_ms: 60000, value: "v1" } });
  report("acquireLock", name, r, r.data?.lock);
  const token = r.data?.token ?? notAToken;
  const holder = { "Lock-Token": token };

  r = await c.GET("/locks/{namespace}/{name}", { params: { path } });
  report("inspectLock", name, r, r.data?.value === "v1" ? r.data.lock : "");
  // Index 1 is never the lock's (indexes come from the clock): the
  // long-poll answers at once, without waiting out its wait.
  r = await c.GET("/locks/{namespace}/{name}", { params: { path, query: { index: 1, wait: "30s" } } });
  report("inspectLock?index", name, r, r.data?.lock);
  r = await c.PUT("/locks/{namespace}/{name}/lease", { params: { path, header: holder }, body: { ttl_ms: 30000 } });
  report("renewLease", name, r, r.data?.lock);
  r = await c.PUT("/locks/{namespace}/{name}/value", { params: { path, header: holder }, body: { value: "v2" } });
  report("setLockValue", name, r, r.data?.lock);

  r = await c.POST("/locks/{namespace}/{name}", {
    params: { path, header: { Prefer: "respond-async" } },
    body: { ttl_ms: 60000, wait_ms: 10000 },
  });
  report("acquireLock (ticket)", name, r, r.data?.lock);
  const ticket = r.data && "ticket_token" in r.data ? r.data : { ticket: noTicket, ticket_token: notAToken };
  const tpath = { ...path, ticket: ticket.ticket };
  r = await c.GET("/locks/{namespace}/{name}/tickets/{ticket}", {
    params: { path: tpath, header: { "Ticket-Token": ticket.ticket_token } },
  });
  report("pollTicket", name, r, r.data?.lock);
  r = await c.DELETE("/locks/{namespace}/{name}/tickets/{ticket}", {
    params: { path: tpath, header: { "Ticket-Token": ticket.ticket_token } },
  });
  report("closeTicket", name, r);

  r = await c.GET("/locks/{namespace}", { params: { path: { namespace: ns } } });
  report("listLocks", name, r, r.data?.locks.find((l) => l.lock === `${ns}/${name}`)?.lock);
  r = await c.DELETE("/locks/{namespace}/{name}", { params: { path, header: holder } });
  report("releaseLock", name, r);
  r = await c.GET("/locks/{namespace}/{name}/history", { params: { path } });
  report("lockHistory", name, r, r.data?.events.length ? r.data.lock : "");

  await c.POST("/locks/{namespace}/{name}", { params: { path }, body: { ttl_ms: 60000 } });
  r = await c.POST("/locks/{namespace}/{name}/break", { params: { path } });
  report("breakLock", name, r, r.data?.broken === 1 ? r.data.lock : "");

  r = await c.POST("/semaphores/{namespace}/{name}", { params: { path }, body: { limit: 2, ttl_ms: 60000 } });
  report("acquireSemaphore", name, r, r.data?.semaphore);
  const permit = { "Lock-Token": r.data?.token ?? notAToken };
  r = await c.GET("/semaphores/{namespace}/{name}", { params: { path } });
  report("inspectSemaphore", name, r, r.data?.semaphore);
  r = await c.PUT("/semaphores/{namespace}/{name}/lease", { params: { path, header: permit }, body: { ttl_ms: 30000 } });
  report("renewSemaphoreLease", name, r, r.data?.semaphore);
  r = await c.PUT("/semaphores/{namespace}/{name}/limit", { params: { path }, body: { limit: 3 } });
  report("resizeSemaphore", name, r, r.data?.semaphore);
  r = await c.DELETE("/semaphores/{namespace}/{name}", { params: { path, header: permit } });
  report("releaseSemaphore", name, r);

  const s = await lg.openSession(c, 60000);
  const joined = { "Session-Token": s.session_token };
  r = await c.POST("/locks/{namespace}/{name}", { params: { path, header: joined }, body: {} });
  report("acquireLock (session)", name, r, r.data?.lock);
  r = await c.GET("/sessions/{session}", { params: { path: { session: s.session }, header: joined } });
  report("describeSession", name, r, r.data?.holds.find((h) => h.resource === `${ns}/${name}`)?.resource);
  await lg.endSession(c, s);

  const locks = `${ns}/${name},${ns}/${name}-2`;
  r = await c.POST("/lock-sets", { body: { locks, ttl_ms: 60000 } });
  report("acquireLockSet", name, r, r.data?.locks[0]?.lock);
  const set = { "Lock-Token": r.data?.token ?? notAToken };
  r = await c.PUT("/lock-sets/lease", { params: { query: { locks }, header: set } });
  report("renewLockSet", name, r, r.data?.locks[0]?.lock);
  r = await c.DELETE("/lock-sets", { params: { query: { locks }, header: set } });
  report("releaseLockSet", name, r);
}
