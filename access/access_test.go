package access

import "testing"

func TestOpString(t *testing.T) {
	for _, tc := range []struct {
		op   Op
		want string
	}{{OpRead, "read"}, {OpWrite, "write"}, {Op(7), "op(7)"}} {
		if got := tc.op.String(); got != tc.want {
			t.Errorf("Op(%d).String() = %q, want %q", tc.op, got, tc.want)
		}
	}
}
