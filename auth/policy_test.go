package auth

import (
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestParsePolicyRefuses(t *testing.T) {
	good := `{"match":{"iss":"x"},"namespaces":["a"]}`
	for name, tc := range map[string]struct{ file, want string }{
		"not JSON":           {`rules`, "JSON object"},
		"no rules":           {`{"rules":[]}`, "non-empty"},
		"unknown top field":  {`{"rules":[` + good + `],"extra":1}`, `unknown field "extra"`},
		"folded top field":   {`{"Rules":[` + good + `]}`, `unknown field "Rules"`},
		"duplicate key":      {`{"rules":[` + good + `],"rules":[]}`, `"rules" appears twice`},
		"trailing data":      {`{"rules":[` + good + `]} {}`, "after"},
		"rule not an object": {`{"rules":[` + good + `,5]}`, "rule 2: want a JSON object"},
		"unknown rule field": {`{"rules":[` + good + `,` + good + `,{"match":{"iss":"x"},"namespaces":["a"],"maxttl":"1m"}]}`, `rule 3: unknown field "maxttl"`},
		"folded rule field":  {`{"rules":[{"match":{"iss":"x"},"Namespaces":["a"]}]}`, `rule 1: unknown field "Namespaces"`},
		"no match":           {`{"rules":[{"namespaces":["a"]}]}`, `rule 1: "match"`},
		"empty match":        {`{"rules":[{"match":{},"namespaces":["a"]}]}`, `rule 1: "match"`},
		"match a number":     {`{"rules":[{"match":{"run":5},"namespaces":["a"]}]}`, `rule 1: match "run": want a string`},
		"match an array":     {`{"rules":[{"match":{"aud":["a"]},"namespaces":["a"]}]}`, `rule 1: match "aud": want a string`},
		"empty claim name":   {`{"rules":[{"match":{"":"x"},"namespaces":["a"]}]}`, "rule 1: match: a claim name is empty"},
		"no namespaces":      {`{"rules":[{"match":{"iss":"x"}}]}`, `rule 1: "namespaces"`},
		"empty namespaces":   {`{"rules":[{"match":{"iss":"x"},"namespaces":[]}]}`, `rule 1: "namespaces"`},
		"upper-case glob":    {`{"rules":[{"match":{"iss":"x"},"namespaces":["Deploy-*"]}]}`, `rule 1: namespace glob "Deploy-*"`},
		"regexp glob":        {`{"rules":[{"match":{"iss":"x"},"namespaces":["deploy.*"]}]}`, `rule 1: namespace glob "deploy.*"`},
		"empty glob":         {`{"rules":[{"match":{"iss":"x"},"namespaces":[""]}]}`, `rule 1: namespace glob ""`},
		"admin not an array": {`{"rules":[{"match":{"iss":"x"},"namespaces":["a"],"admin_namespaces":"a"}]}`, `rule 1: "admin_namespaces" must be an array`},
		"bad admin glob":     {`{"rules":[{"match":{"iss":"x"},"namespaces":["a"],"admin_namespaces":["A"]}]}`, `rule 1: admin namespace glob "A"`},
		"bad duration":       {`{"rules":[` + good + `,{"match":{"iss":"x"},"namespaces":["a"],"max_ttl":"10 minutes"}]}`, `rule 2: max_ttl "10 minutes"`},
		"negative duration":  {`{"rules":[{"match":{"iss":"x"},"namespaces":["a"],"max_ttl":"-1m"}]}`, `rule 1: max_ttl "-1m"`},
		"zero duration":      {`{"rules":[{"match":{"iss":"x"},"namespaces":["a"],"max_ttl":"0s"}]}`, `rule 1: max_ttl "0s"`},
		"numeric duration":   {`{"rules":[{"match":{"iss":"x"},"namespaces":["a"],"max_ttl":600}]}`, "rule 1: max_ttl: want a duration"},
		"bad max_hold":       {`{"rules":[{"match":{"iss":"x"},"namespaces":["a"],"max_hold":"0s"}]}`, `rule 1: max_hold "0s"`},
		"numeric max_hold":   {`{"rules":[{"match":{"iss":"x"},"namespaces":["a"],"max_hold":600}]}`, "rule 1: max_hold: want a duration"},
		"zero rate":          {`{"rules":[{"match":{"iss":"x"},"namespaces":["a"],"subject_rate":0}]}`, "rule 1: subject_rate: want requests per second"},
		"rate as string":     {`{"rules":[{"match":{"iss":"x"},"namespaces":["a"],"subject_rate":"5/s"}]}`, "rule 1: subject_rate"},
		"huge rate":          {`{"rules":[{"match":{"iss":"x"},"namespaces":["a"],"subject_rate":1e7}]}`, "rule 1: subject_rate"},
		"fractional burst":   {`{"rules":[{"match":{"iss":"x"},"namespaces":["a"],"subject_burst":1.5}]}`, "rule 1: subject_burst: want a whole number"},
		"zero waiters":       {`{"rules":[` + good + `,{"match":{"iss":"x"},"namespaces":["a"],"subject_max_waiters":0}]}`, "rule 2: subject_max_waiters: want a whole number"},
		"folded limit":       {`{"rules":[{"match":{"iss":"x"},"namespaces":["a"],"Subject_Rate":1}]}`, `rule 1: unknown field "Subject_Rate"`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParsePolicy([]byte(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %s", err, tc.want)
			}
		})
	}
}

const testPolicy = `{"rules": [
	{"match": {"iss": "https://ci.example", "repository": "acme/*"}, "namespaces": ["deploy-*"], "max_ttl": "10m"},
	{"match": {"iss": "https://ci.example", "repository": "acme/app", "ref": "refs/heads/main"}, "namespaces": ["prod", "deploy-*"], "max_ttl": "2m"},
	{"match": {"iss": "https://ci.example", "groups": "admins"}, "namespaces": ["*"]},
	{"match": {"run_attempt": "1"}, "namespaces": ["first-try"]},
	{"match": {"sub": "system:serviceaccount:ci:*"}, "namespaces": ["k8s-ci"], "max_ttl": "1h"}
]}`

func TestPolicyGrant(t *testing.T) {
	p, err := ParsePolicy([]byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		claims string
		ns     []string
		maxTTL time.Duration
	}{
		"one rule":             {`{"iss":"https://ci.example","repository":"acme/lib"}`, []string{"deploy-*"}, 10 * time.Minute},
		"two rules add up":     {`{"iss":"https://ci.example","repository":"acme/app","ref":"refs/heads/main"}`, []string{"deploy-*", "prod"}, 2 * time.Minute},
		"one condition fails":  {`{"iss":"https://other.example","repository":"acme/app"}`, nil, 0},
		"glob is whole":        {`{"iss":"https://ci.example","repository":"acme"}`, nil, 0},
		"glob not a prefix":    {`{"iss":"https://ci.example","repository":"xacme/app"}`, nil, 0},
		"case matters":         {`{"iss":"https://ci.example","repository":"ACME/app"}`, nil, 0},
		"claim name exact":     {`{"iss":"https://ci.example","Repository":"acme/app"}`, nil, 0},
		"missing claim":        {`{"iss":"https://ci.example"}`, nil, 0},
		"array, one element":   {`{"iss":"https://ci.example","groups":["dev","admins"]}`, []string{"*"}, 0},
		"array, none":          {`{"iss":"https://ci.example","groups":["dev"]}`, nil, 0},
		"array of non-strings": {`{"iss":"https://ci.example","groups":[1,{"a":"admins"}]}`, nil, 0},
		"number never matches": {`{"run_attempt":1}`, nil, 0},
		"string does":          {`{"run_attempt":"1"}`, []string{"first-try"}, 0},
		"null never matches":   {`{"iss":"https://ci.example","groups":null}`, nil, 0},
		"uncapped rule too":    {`{"iss":"https://ci.example","repository":"acme/x","groups":"admins"}`, []string{"deploy-*", "*"}, 10 * time.Minute},
		"service account":      {`{"sub":"system:serviceaccount:ci:builder"}`, []string{"k8s-ci"}, time.Hour},
	} {
		t.Run(name, func(t *testing.T) {
			var claims map[string]json.RawMessage
			if err := json.Unmarshal([]byte(tc.claims), &claims); err != nil {
				t.Fatal(err)
			}
			g := p.grant(claims)
			ns, maxTTL := g.namespaces, g.maxTTL
			slices.Sort(ns)
			want := slices.Sorted(slices.Values(tc.ns))
			if !slices.Equal(ns, want) || maxTTL != tc.maxTTL {
				t.Fatalf("got %q, %s; want %q, %s", ns, maxTTL, want, tc.maxTTL)
			}
		})
	}
}

// TestPolicyLimits: each subject limit is the smallest that the matching
// rules set, field by field; rules that set none leave it unset (0).
func TestPolicyLimits(t *testing.T) {
	p, err := ParsePolicy([]byte(`{"rules": [
		{"match": {"iss": "ci"}, "namespaces": ["ci"], "subject_rate": 10, "subject_burst": 50},
		{"match": {"iss": "ci", "repository": "acme/*"}, "namespaces": ["acme"], "subject_rate": 100, "subject_burst": 20, "subject_max_waiters": 4},
		{"match": {"iss": "ci", "repository": "acme/app"}, "namespaces": ["app"], "subject_rate": 0.5},
		{"match": {"iss": "k8s"}, "namespaces": ["k8s"]}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		claims string
		want   Limits
	}{
		"one rule":                {`{"iss":"ci"}`, Limits{Rate: 10, Burst: 50}},
		"smallest of each field":  {`{"iss":"ci","repository":"acme/lib"}`, Limits{Rate: 10, Burst: 20, MaxWaiters: 4}},
		"rate of a third rule":    {`{"iss":"ci","repository":"acme/app"}`, Limits{Rate: 0.5, Burst: 20, MaxWaiters: 4}},
		"rule without limits":     {`{"iss":"k8s"}`, Limits{}},
		"no rule, no limits here": {`{"iss":"other"}`, Limits{}},
	} {
		t.Run(name, func(t *testing.T) {
			var claims map[string]json.RawMessage
			if err := json.Unmarshal([]byte(tc.claims), &claims); err != nil {
				t.Fatal(err)
			}
			if got := p.grant(claims).limits; got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestAdministers: a token administers a namespace that its admin claim,
// or a policy rule's admin_namespaces, names and that it is granted; an
// admin glob alone reaches no namespace the token may not use.
func TestAdministers(t *testing.T) {
	p, err := ParsePolicy([]byte(`{"rules": [
		{"match": {"iss": "ci"}, "namespaces": ["deploy-*"], "admin_namespaces": ["deploy-prod"]},
		{"match": {"iss": "ci", "team": "ops"}, "namespaces": ["ops"], "admin_namespaces": ["*"]}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		claims string
		ns     string
		want   bool
	}{
		"admin claim":                {`{"ns":["billing"],"ns_admin":["billing"]}`, "billing", true},
		"admin glob":                 {`{"ns":["etl-*"],"ns_admin":["etl-*"]}`, "etl-daily", true},
		"granted, not administered":  {`{"ns":["billing"]}`, "billing", false},
		"admin claim beyond ns":      {`{"ns":["billing"],"ns_admin":["*"]}`, "payroll", false},
		"admin claim, other ns":      {`{"ns":["billing","payroll"],"ns_admin":["payroll"]}`, "billing", false},
		"policy rule":                {`{"iss":"ci"}`, "deploy-prod", true},
		"policy, granted only":       {`{"iss":"ci"}`, "deploy-dev", false},
		"policy star, within grants": {`{"iss":"ci","team":"ops"}`, "deploy-dev", true},
		"policy star, beyond grants": {`{"iss":"ci","team":"ops"}`, "billing", false},
		"no policy rule matches":     {`{"iss":"other"}`, "deploy-prod", false},
	} {
		t.Run(name, func(t *testing.T) {
			c := tokenClaims{nsClaim: "ns"}
			if err := json.Unmarshal([]byte(tc.claims), &c); err != nil {
				t.Fatal(err)
			}
			claims := Claims{Namespaces: c.ns, AdminNamespaces: c.admin}
			if !c.hasNS {
				g := p.grant(c.all)
				claims.Namespaces, claims.AdminNamespaces = g.namespaces, g.admin
			}
			if got := claims.Administers(tc.ns); got != tc.want {
				t.Fatalf("Administers(%q) with %s: got %v, want %v", tc.ns, tc.claims, got, tc.want)
			}
		})
	}
}

// TestAuthenticateWithPolicy: the policy grants namespaces only to tokens
// without the namespace claim, which --jwt-ns-claim may rename.
func TestAuthenticateWithPolicy(t *testing.T) {
	p, err := ParsePolicy([]byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAuthenticator(Config{Secret: []byte(testSecret), Policy: p, NSClaim: "lockgate/ns"})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour).Unix()
	for name, tc := range map[string]struct {
		claims jwt.MapClaims
		ns     []string
		maxTTL time.Duration
	}{
		"policy":                {jwt.MapClaims{"iss": "https://ci.example", "repository": "acme/lib"}, []string{"deploy-*"}, 10 * time.Minute},
		"own claim wins":        {jwt.MapClaims{"iss": "https://ci.example", "repository": "acme/lib", "lockgate/ns": []string{"mine"}}, []string{"mine"}, 0},
		"ns is not the claim":   {jwt.MapClaims{"ns": []string{"*"}}, nil, 0},
		"empty claim, no rules": {jwt.MapClaims{"iss": "https://ci.example", "repository": "acme/lib", "lockgate/ns": []string{}}, []string{}, 0},
	} {
		t.Run(name, func(t *testing.T) {
			tc.claims["sub"], tc.claims["exp"] = "s", exp
			tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, tc.claims).SignedString([]byte(testSecret))
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set("Authorization", "Bearer "+tok)
			c, err := a.Authenticate(r)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.Namespaces, tc.ns) || c.MaxTTL != tc.maxTTL {
				t.Fatalf("got %q, %s; want %q, %s", c.Namespaces, c.MaxTTL, tc.ns, tc.maxTTL)
			}
		})
	}
}

// TestPolicyMaxHold: a token's max_hold is the smallest of the rules that
// match it, and none when none sets one.
func TestPolicyMaxHold(t *testing.T) {
	p, err := ParsePolicy([]byte(`{"rules": [
	{"match": {"iss": "x"}, "namespaces": ["jobs"], "max_hold": "10m"},
	{"match": {"iss": "x", "team": "batch"}, "namespaces": ["batch"], "max_hold": "2m"},
	{"match": {"iss": "y"}, "namespaces": ["free"]}
]}`))
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		claims string
		want   time.Duration
	}{
		"one rule": {`{"iss":"x"}`, 10 * time.Minute},
		"smallest": {`{"iss":"x","team":"batch"}`, 2 * time.Minute},
		"no max":   {`{"iss":"y"}`, 0},
	} {
		var claims map[string]json.RawMessage
		if err := json.Unmarshal([]byte(tc.claims), &claims); err != nil {
			t.Fatal(err)
		}
		if got := p.grant(claims).maxHold; got != tc.want {
			t.Errorf("%s: got max_hold %v, want %v", name, got, tc.want)
		}
	}
}
