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

// globsOverlap reports whether some namespace matches both globs, whose
// only wildcard is '*' (any run of characters).
func globsOverlap(a, b string) bool {
	seen := make(map[[2]int]bool)
	var overlap func(i, j int) bool
	overlap = func(i, j int) bool {
		if seen[[2]int{i, j}] {
			return false // tried already, and it failed
		}
		seen[[2]int{i, j}] = true
		switch {
		case i == len(a) && j == len(b):
			return true
		case i < len(a) && a[i] == '*':
			// a's star matches nothing more, or takes b's next character
			// (or all b's star makes).
			return overlap(i+1, j) || j < len(b) && overlap(i, j+1)
		case j < len(b) && b[j] == '*':
			return overlap(i, j+1) || i < len(a) && overlap(i+1, j)
		case i < len(a) && j < len(b) && a[i] == b[j]:
			return overlap(i+1, j+1)
		}
		return false
	}
	return overlap(0, 0)
}
