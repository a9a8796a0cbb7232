package proxy

import (
	"bytes"
	"fmt"
	"strings"
)

// Keys found locally. The proxy never asks Redis for a command's keys
// (COMMAND GETKEYS would copy the client's arguments, passwords included,
// onto a connection of the proxy's own, where MONITOR and SLOWLOG show them
// unredacted, and cost a round trip): it reads the key specifications of
// Redis 7's COMMAND table once, and evaluates them as Redis does
// (getKeysUsingKeySpecs); SORT and MIGRATE, whose specs are incomplete,
// get Redis' own procedures (sortGetKeys, migrateGetKeys).

// keySpec is one key specification: where the search for keys begins, and
// how they are found from there.
type keySpec struct {
	notKey bool // NOT_KEY: not a key (skipped)

	bsKeyword   string // begin search at a keyword; "" with bsIndex > 0: at an index
	bsIndex     int
	bsStartFrom int // keyword: search from here (negative: from the end, backwards)

	fkKeynum  bool // find keys: a count argument gives them; else a range
	lastKey   int  // range: last key, relative to the first (negative: from the end)
	keyStep   int
	limit     int // range: with lastKey -1, 1/limit of what is left
	keynumIdx int // keynum: the count's position, relative to the first
	firstKey  int // keynum: the first key's, relative to the first
}

// keysFromSpecs appends the keys specs find in args to dst, as Redis does
// with GET_KEYSPEC_RETURN_PARTIAL: a spec that does not apply is skipped.
func keysFromSpecs(dst [][]byte, specs []keySpec, args [][]byte) [][]byte {
	argc := len(args)
	for _, sp := range specs {
		if sp.notKey {
			continue
		}
		first := 0
		switch {
		case sp.bsKeyword != "":
			start, end := sp.bsStartFrom, argc-1
			if start <= 0 {
				start, end = argc+sp.bsStartFrom, 1
			}
			for i := start; i != end; {
				if i >= argc || i < 1 {
					break
				}
				if strings.EqualFold(string(args[i]), sp.bsKeyword) {
					first = i + 1
					break
				}
				if start <= end {
					i++
				} else {
					i--
				}
			}
			if first == 0 {
				continue
			}
		case sp.bsIndex > 0:
			first = sp.bsIndex
		default:
			continue // unknown
		}
		var last, step int
		if sp.fkKeynum {
			step = sp.keyStep
			if first+sp.keynumIdx >= argc {
				continue
			}
			n, ok := string2ll(args[first+sp.keynumIdx])
			if !ok || n < 0 || n > int64(argc) {
				continue
			}
			first += sp.firstKey
			last = first + int(n) - 1
		} else {
			step = sp.keyStep
			switch {
			case sp.lastKey >= 0:
				last = first + sp.lastKey
			case sp.limit == 0:
				last = argc + sp.lastKey
			default:
				last = first + ((argc-first)/sp.limit + sp.lastKey)
			}
		}
		if last >= argc || last < first || first >= argc || step < 1 {
			continue
		}
		for i := first; i <= last; i += step {
			dst = append(dst, args[i])
		}
	}
	return dst
}

// sortKeys is Redis' sortGetKeys: the key, and the last STORE's destination;
// LIMIT, GET and BY take arguments of their own.
func sortKeys(dst [][]byte, args [][]byte) [][]byte {
	if len(args) < 2 {
		return dst
	}
	dst = append(dst, args[1])
	store := -1
	for i := 2; i < len(args); i++ {
		switch {
		case bytes.EqualFold(args[i], []byte("limit")):
			i += 2
		case bytes.EqualFold(args[i], []byte("get")), bytes.EqualFold(args[i], []byte("by")):
			i++
		case bytes.EqualFold(args[i], []byte("store")) && i+1 < len(args):
			store = i + 1
		}
	}
	if store > 0 {
		dst = append(dst, args[store])
	}
	return dst
}

// migrateKeys is Redis' migrateGetKeys: MIGRATE host port key db timeout, or
// with an empty key, the keys after KEYS; COPY, REPLACE, AUTH password and
// AUTH2 user password are skipped on the way.
func migrateKeys(dst [][]byte, args [][]byte) [][]byte {
	if len(args) < 4 {
		return dst
	}
	first, num := 3, 1
	for i := 6; i < len(args); i++ {
		switch {
		case bytes.EqualFold(args[i], []byte("keys")):
			if len(args[3]) > 0 {
				return dst
			}
			first, num = i+1, len(args)-i-1
			i = len(args)
		case bytes.EqualFold(args[i], []byte("auth")):
			i++
		case bytes.EqualFold(args[i], []byte("auth2")):
			i += 2
		}
	}
	return append(dst, args[first:first+num]...)
}

// keyProcs are the commands whose keys a procedure of Redis' finds.
var keyProcs = map[string]func(dst, args [][]byte) [][]byte{
	"sort": sortKeys, "sort_ro": sortKeys, "migrate": migrateKeys,
}

// parseKeySpecs reads the key specifications of a COMMAND entry (element
// 8): an array of specs, each a map (RESP3) or a flat array of names and
// values (RESP2).
func parseKeySpecs(v any) ([]keySpec, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("key specs: %T", v)
	}
	specs := make([]keySpec, 0, len(list))
	for _, e := range list {
		m := asMap(e)
		var sp keySpec
		for _, f := range asStrings(m["flags"]) {
			if strings.EqualFold(f, "not_key") {
				sp.notKey = true
			}
		}
		bs := asMap(m["begin_search"])
		bspec := asMap(bs["spec"])
		switch asString(bs["type"]) {
		case "index":
			sp.bsIndex = asInt(bspec["index"])
		case "keyword":
			sp.bsKeyword, sp.bsStartFrom = asString(bspec["keyword"]), asInt(bspec["startfrom"])
		}
		fk := asMap(m["find_keys"])
		fspec := asMap(fk["spec"])
		switch asString(fk["type"]) {
		case "range":
			sp.lastKey, sp.keyStep, sp.limit = asInt(fspec["lastkey"]), asInt(fspec["keystep"]), asInt(fspec["limit"])
		case "keynum":
			sp.fkKeynum = true
			sp.keynumIdx, sp.firstKey, sp.keyStep = asInt(fspec["keynumidx"]), asInt(fspec["firstkey"]), asInt(fspec["keystep"])
		default:
			sp.bsIndex, sp.bsKeyword = 0, "" // unknown: skipped
		}
		specs = append(specs, sp)
	}
	return specs, nil
}

// asMap reads a map: RESP3's, or RESP2's flat array of names and values.
func asMap(v any) map[string]any {
	out := map[string]any{}
	switch x := v.(type) {
	case map[any]any:
		for k, val := range x {
			out[asString(k)] = val
		}
	case map[string]any:
		return x
	case []any:
		for i := 0; i+1 < len(x); i += 2 {
			out[asString(x[i])] = x[i+1]
		}
	}
	return out
}

func asString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	}
	return ""
}

func asInt(v any) int {
	switch x := v.(type) {
	case int64:
		return int(x)
	case int:
		return x
	}
	return 0
}

func asStrings(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, e := range list {
		out = append(out, asString(e))
	}
	return out
}
