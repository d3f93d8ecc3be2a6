package clients

import (
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/callbacks"
)

// callbackClients run, in each client, a receiver on loopback and a
// ticket whose callback_url points at it. The receiver checks each
// notification with the client's verifier and the ticket's own secret
// (the callback_secret of the 202 that opened it: the client never holds
// the operator's); the client then checks that a tampered body and an old
// timestamp do not verify, and picks the grant up by polling the ticket it
// opened (never poll_url from the body), and releases it.
var callbackClients = map[string]func(t *testing.T) *exec.Cmd{
	"python": func(t *testing.T) *exec.Cmd {
		return pythonSnippet(t, `import queue, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from verify_callback import BadSignature, verify_callback
secret = None  # the ticket's callback_secret, once it is open
got = queue.Queue()

class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            note = verify_callback(secret, self.headers, body)
        except BadSignature as e:
            print("refused a notification:", e, flush=True)
            self.send_response(400)
            self.end_headers()
            return
        self.send_response(204)
        self.end_headers()
        got.put(({k.lower(): v for k, v in self.headers.items()}, body, note))

    def log_message(self, *args):
        pass

srv = ThreadingHTTPServer(("127.0.0.1", int(os.environ["HOOK_PORT"])), Receiver)
threading.Thread(target=srv.serve_forever, daemon=True).start()
hook = f"http://127.0.0.1:{srv.server_address[1]}/hooks/deploy"

ticket = c.open_ticket("clients/deploy", ttl_ms=60000, wait_ms=60000, callback_url=hook)
secret = ticket["callback_secret"]
print("ticket rank", ticket["rank"], flush=True)
headers, body, note = got.get(timeout=30)
same = "the same ticket" if note["data"]["ticket"] == ticket["ticket"] else "another ticket"
print("notified", note["type"], note["data"]["lock"], same)
for what, h, b in [("tampered", headers, body.replace(b"clients/deploy", b"clients/other")),
                   ("unsigned", {k: v for k, v in headers.items() if k != "webhook-signature"}, body)]:
    try:
        verify_callback(secret, h, b)
        print(what + ": accepted")
    except BadSignature:
        print(what + ": refused")
try:
    verify_callback(secret, headers, body, now=int(headers["webhook-timestamp"]) + 3600)
    print("replayed: accepted")
except BadSignature:
    print("replayed: refused")
g = c.poll_ticket("clients/deploy", ticket)
mine = "its token the ticket token" if g["token"] == ticket["ticket_token"] else "another token"
print(f"acquired {g['lock']} with the ticket fencing_token={g['fencing_token']}, {mine}")
print("released", c.release("clients/deploy", g["token"]))`)
	},
	"node": func(t *testing.T) *exec.Cmd {
		return nodeSnippet(t, `import { createServer } from "node:http";
import { BadSignature, verifyCallback } from "./dist/callbacks.js";
let secret; // the ticket's callback_secret, once it is open
let deliver;
const got = new Promise((resolve) => { deliver = resolve; });
const srv = createServer((req, res) => {
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    const body = Buffer.concat(chunks);
    let note;
    try {
      note = verifyCallback(secret, req.headers, body);
    } catch (err) {
      if (!(err instanceof BadSignature)) throw err;
      console.log("refused a notification:", err.message);
      res.writeHead(400).end();
      return;
    }
    res.writeHead(204).end();
    deliver({ headers: req.headers, body, note });
  });
});
await new Promise((resolve) => srv.listen(Number(process.env.HOOK_PORT), "127.0.0.1", resolve));
const hook = "http://127.0.0.1:" + srv.address().port + "/hooks/deploy";

const ticket = await lg.openTicket(c, "clients/deploy", 60000, { ttlMs: 60000, callbackUrl: hook });
secret = ticket.callback_secret;
console.log("ticket rank", ticket.rank);
const { headers, body, note } = await got;
console.log("notified", note.type, note.data.lock, note.data.ticket === ticket.ticket ? "the same ticket" : "another ticket");
const check = (what, h, b, opts) => {
  try {
    verifyCallback(secret, h, b, opts);
    console.log(what + ": accepted");
  } catch (err) {
    if (!(err instanceof BadSignature)) throw err;
    console.log(what + ": refused");
  }
};
check("tampered", headers, Buffer.from(body.toString().replace("clients/deploy", "clients/other")));
const { ["webhook-signature"]: _, ...unsigned } = headers;
check("unsigned", unsigned, body);
check("replayed", headers, body, { nowS: Number(headers["webhook-timestamp"]) + 3600 });
const g = await lg.pollTicket(c, "clients/deploy", ticket);
const mine = g.token === ticket.ticket_token ? "its token the ticket token" : "another token";
console.log("acquired " + g.lock + " with the ticket fencing_token=" + g.fencing_token + ", " + mine);
const { response } = await c.DELETE("/locks/{namespace}/{name}", { params: { path: lg.lockPath("clients/deploy"), header: { "Lock-Token": g.token } } });
console.log("released", response.status);
srv.closeAllConnections();
srv.close();`)
	},
}

var callbackAcquiredRE = regexp.MustCompile(`acquired clients/deploy with the ticket fencing_token=(\d+), its token the ticket token\n`)

// TestClientsCallback: a ticket with a callback to a loopback receiver
// (allowed by --callback-allow, signed with the ticket's secret, derived
// from --callback-secret): when the holder releases, the receiver gets a
// notification that the client's verifier accepts with the ticket's
// callback_secret and that names the ticket; the verifier refuses it
// tampered, unsigned or old; the ticket's poll gets the grant.
func TestClientsCallback(t *testing.T) {
	startNodeBuild()
	t.Parallel()
	for name, run := range callbackClients {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := run(t) // skips early without the runtime
			whsec := callbacks.NewSecret().Encode()
			// An IP pattern names its port: the receiver's is chosen here.
			hookPort := freePort(t)
			gw := startGatewayEnv(t, map[string]string{
				"LOCKGATE_CALLBACK_SECRET": whsec,
				"LOCKGATE_CALLBACK_ALLOW":  "http://127.0.0.1:" + hookPort + "/hooks/*",
			})
			status, held := gw.acquire(t, "clients/deploy", time.Minute)
			if status != http.StatusCreated {
				t.Fatalf("acquire: %d", status)
			}
			p := start(t, gw, cmd, "HOOK_PORT="+hookPort)
			p.waitOutput(t, "ticket rank 0")
			if status, _ := gw.call(t, "DELETE", "clients/deploy", "", held.Token); status != http.StatusNoContent {
				t.Fatalf("release: %d", status)
			}
			if code := p.wait(t, 60*time.Second); code != 0 {
				t.Fatalf("exit %d, want 0\nstdout: %s\nstderr: %s", code, p.stdout, p.stderr)
			}
			out := p.stdout.String()
			for _, want := range []string{"notified ticket.granted clients/deploy the same ticket\n",
				"tampered: refused\n", "unsigned: refused\n", "replayed: refused\n", "released 204\n"} {
				if !strings.Contains(out, want) {
					t.Errorf("stdout lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "refused a notification") {
				t.Errorf("the receiver refused a notification of the gateway:\n%s", out)
			}
			m := callbackAcquiredRE.FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("stdout %q, want the grant picked up with the ticket", out)
			}
			if fence, _ := strconv.ParseInt(m[1], 10, 64); fence <= held.FencingToken {
				t.Fatalf("fencing token %d after the holder's %d, want larger", fence, held.FencingToken)
			}
			// The gateway counts the delivery once it has read the
			// receiver's answer, which may come after the client exits.
			const delivered = `lockgate_callbacks_total{outcome="delivered"} 1` + "\n"
			for deadline := time.Now().Add(10 * time.Second); !strings.Contains(gw.metrics(), delivered); {
				if time.Now().After(deadline) {
					t.Fatalf("/metrics lacks %s", delivered)
				}
				time.Sleep(10 * time.Millisecond) // poll interval, not synchronisation
			}
			if gw.held(t, "clients/deploy") {
				t.Fatal("the lock is held after the client exited")
			}
			if all := out + p.stderr.String(); strings.Contains(all, "whsec_") || strings.Contains(all, strings.TrimPrefix(whsec, "whsec_")) {
				t.Fatal("the client printed a callback secret")
			}
			p.noSecrets(t)
		})
	}
}
