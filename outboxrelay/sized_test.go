package outboxrelay

import (
	"slices"
	"strconv"
	"testing"
)

func TestSizedPadsToAFewStatementSizes(t *testing.T) {
	for _, c := range []struct{ n, limit, want int }{
		{1, 500, 1}, {2, 500, 4}, {4, 500, 4}, {5, 500, 16}, {100, 500, 256},
		{257, 500, 500}, {500, 500, 500}, {3, 3, 3}, {64, 100, 64},
	} {
		if got := sized(c.n, c.limit); got != c.want {
			t.Errorf("sized(%d, %d) = %d, want %d", c.n, c.limit, got, c.want)
		}
	}
	got := ofEverySize(500, strconv.Itoa)
	if want := []string{"1", "4", "16", "64", "256", "500"}; !slices.Equal(got, want) {
		t.Errorf("ofEverySize(500) = %v, want %v", got, want)
	}
	// Every size sized returns is among those warmed.
	for n := 1; n <= 500; n++ {
		if !slices.Contains(got, strconv.Itoa(sized(n, 500))) {
			t.Fatalf("sized(%d, 500) = %d is not warmed", n, sized(n, 500))
		}
	}
	if got := ofEverySize(256, strconv.Itoa); !slices.Equal(got, []string{"1", "4", "16", "64", "256"}) {
		t.Errorf("ofEverySize(256) = %v", got)
	}
}

// TestSizedArgs: the arguments are the lead values, then the values padded
// with the last one to the statement's size.
func TestSizedArgs(t *testing.T) {
	n, args := sizedArgs([]int64{7, 8, 9}, 500, "now")
	if want := []any{"now", int64(7), int64(8), int64(9), int64(9)}; n != 4 || !slices.Equal(args, want) {
		t.Errorf("sizedArgs(3 ids, 500, lead) = %d, %v; want 4, %v", n, args, want)
	}
	n, args = sizedArgs([]string{"a"}, 500)
	if n != 1 || !slices.Equal(args, []any{"a"}) {
		t.Errorf("sizedArgs(1 id, 500) = %d, %v", n, args)
	}
	ids := make([]int64, 300)
	if n, args := sizedArgs(ids, 300, 1, 2); n != 300 || len(args) != 302 {
		t.Errorf("sizedArgs(300 ids, 300, 2 leads) = %d, %d args; want 300, 302", n, len(args))
	}
}
