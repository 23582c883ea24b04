package plainjson

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// AppendString writes what json.Marshal writes of a string.
func TestAppendStringAsJSONMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	odd := []string{"", "plain", `q"uote\back`, "<tag>&amp;", "tab\tnl\nret\rbs\bff\f", "\x00\x01\x1f\x7f",
		"é中文😀", "\u2028\u2029", "bad\xffutf8\xc3", "trailing\xe2\x82"}
	for i := range 5000 {
		s := odd[i%len(odd)]
		for range rng.IntN(4) {
			s += string([]byte{byte(rng.IntN(256))})
		}
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Fatalf("%q:\n got %s\nwant %s", s, got, want)
		}
	}
}

// What a reader accepts, json.Unmarshal reads as the same value; the
// readers accept the plain values the encoders write.
func TestReadersAsJSONUnmarshal(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool // the reader accepts it
	}{
		{`"plain"`, true}, {`""`, true}, {`"é中文"`, true}, {`"a\"b"`, false}, {`"a` + "\n" + `"`, false},
		{`"bad` + "\xff" + `"`, false}, {`"open`, false}, {`x`, false},
	} {
		got, rest, ok := String([]byte(tc.in + ",x"))
		var want string
		err := json.Unmarshal([]byte(tc.in), &want)
		if ok != tc.want || ok && (err != nil || got != want || string(rest) != ",x") {
			t.Errorf("String(%q) = %q, %q, %v; json %q, %v", tc.in, got, rest, ok, want, err)
		}
	}
	for _, known := range []string{"plain", "other", `a\"b`} {
		got, rest, ok := StringAs([]byte(`"plain",x`), known)
		if !ok || got != "plain" || string(rest) != ",x" {
			t.Errorf("StringAs(%q) = %q, %q, %v", known, got, rest, ok)
		}
	}
	if _, _, ok := StringAs([]byte(`"a\"b"`), `a\"b`); ok {
		t.Error("StringAs read an escaped string")
	}
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{`0`, true}, {`-7`, true}, {`9223372036854775807`, true}, {`-9223372036854775808`, true},
		{`9223372036854775808`, false}, {`01`, false}, {`-`, false}, {`1.5`, true}, {`x`, false},
	} {
		got, rest, ok := Int([]byte(tc.in))
		if ok != tc.want {
			t.Errorf("Int(%q) ok = %v", tc.in, ok)
			continue
		}
		if !ok {
			continue
		}
		// "1.5" reads 1 and leaves ".5": the caller's next Skip fails.
		var want int64
		if err := json.Unmarshal([]byte(tc.in[:len(tc.in)-len(rest)]), &want); err != nil || got != want {
			t.Errorf("Int(%q) = %d; json %d, %v", tc.in, got, want, err)
		}
	}
	for _, tc := range []struct {
		in       string
		want, ok bool
	}{{"true", true, true}, {"false", false, true}, {"tru", false, false}, {"null", false, false}} {
		got, _, ok := Bool([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("Bool(%q) = %v, %v", tc.in, got, ok)
		}
	}
	if rest, ok := Skip([]byte(`{"a":1`), `{"a":`); !ok || string(rest) != "1" {
		t.Errorf("Skip = %q, %v", rest, ok)
	}
	if rest, ok := Skip([]byte(`{"b":1`), `{"a":`); ok || string(rest) != `{"b":1` {
		t.Errorf("Skip of another key = %q, %v", rest, ok)
	}
}
