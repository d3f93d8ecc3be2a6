package auth

// matchNamespace reports whether glob matches the whole of namespace. The
// only wildcard is '*', which matches any run of characters, including none;
// every other character matches itself, so "a" does not grant "ab" and
// "etl-*" does not grant "etl".
//
// It is the classic greedy matcher that remembers only the last star, so it
// runs in O(len(glob)*len(namespace)) however many stars a token carries.
func matchNamespace(glob, namespace string) bool {
	g, n := 0, 0
	star, resume := -1, 0 // position after the last '*' in glob, and where it resumes in namespace
	for n < len(namespace) {
		switch {
		case g < len(glob) && glob[g] == '*':
			star, resume = g+1, n
			g++
		case g < len(glob) && glob[g] == namespace[n]:
			g++
			n++
		case star >= 0:
			// Let the last star swallow one more character and retry.
			resume++
			g, n = star, resume
		default:
			return false
		}
	}
	for g < len(glob) && glob[g] == '*' {
		g++
	}
	return g == len(glob)
}
