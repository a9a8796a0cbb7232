package proxy

import (
	"net"
	"strconv"
)

// The proxy's answers to CLUSTER SLOTS, SHARDS, NODES, INFO, MYID and
// MYSHARDID in cluster mode: a cluster of two masters, both the proxy itself
// at the address the client reached it on, one owning slots 0-8191, the
// other 8192-16383, no replica. Two, not one: redis-benchmark 7.0 --cluster
// refuses a cluster of one node; a client that maps slots to addresses sees
// one node. The formats are Redis 7's, in RESP2 and RESP3 (maps in RESP3,
// flat arrays in RESP2; NODES and INFO verbatim strings in RESP3).

// virtualNodes are the proxy's halves of the slot space.
var virtualNodes = [2][2]int{{0, 8191}, {8192, 16383}}

// clusterReply answers a CLUSTER subcommand the proxy owns; ok is false for
// the others (forwarded).
func (p *Proxy) clusterReply(args [][]byte, proto int, self net.Addr) ([]byte, bool) {
	if len(args) != 2 {
		return nil, false
	}
	ip, port := "127.0.0.1", 6380
	if ta, ok := self.(*net.TCPAddr); ok {
		ip, port = ta.IP.String(), ta.Port
	}
	id := func(i int) string { return p.cluster.nodeID(i) }
	sub := args[1]
	switch {
	case eqFold(sub, "slots"):
		b := []byte("*2\r\n")
		for i, r := range virtualNodes {
			b = append(b, "*3\r\n"...)
			b = appendInt(b, r[0])
			b = appendInt(b, r[1])
			b = append(b, "*4\r\n"...)
			b = appendBulk(b, []byte(ip))
			b = appendInt(b, port)
			b = appendBulk(b, []byte(id(i)))
			if proto >= 3 {
				b = append(b, "%0\r\n"...)
			} else {
				b = append(b, "*0\r\n"...)
			}
		}
		return b, true
	case eqFold(sub, "shards"):
		b := []byte("*2\r\n")
		for i, r := range virtualNodes {
			b = appendMapHeader(b, 2, proto)
			b = appendBulk(b, []byte("slots"))
			b = append(b, "*2\r\n"...)
			b = appendInt(b, r[0])
			b = appendInt(b, r[1])
			b = appendBulk(b, []byte("nodes"))
			b = append(b, "*1\r\n"...)
			b = appendMapHeader(b, 7, proto)
			for _, kv := range [][2]string{{"id", id(i)}, {"port", ""}, {"ip", ip}, {"endpoint", ip}, {"role", "master"},
				{"replication-offset", ""}, {"health", "online"}} {
				b = appendBulk(b, []byte(kv[0]))
				switch kv[0] {
				case "port":
					b = appendInt(b, port)
				case "replication-offset":
					b = appendInt(b, 0)
				default:
					b = appendBulk(b, []byte(kv[1]))
				}
			}
		}
		return b, true
	case eqFold(sub, "nodes"):
		cport := port + 10000
		if cport > 65535 {
			cport = port
		}
		var lines string
		for i, r := range virtualNodes {
			flags := "master"
			if i == 0 {
				flags = "myself,master"
			}
			lines += id(i) + " " + net.JoinHostPort(ip, strconv.Itoa(port)) + "@" + strconv.Itoa(cport) + " " + flags +
				" - 0 0 " + strconv.Itoa(i+1) + " connected " + strconv.Itoa(r[0]) + "-" + strconv.Itoa(r[1]) + "\n"
		}
		return appendText(nil, lines, proto), true
	case eqFold(sub, "info"):
		info := "cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\ncluster_slots_pfail:0\r\n" +
			"cluster_slots_fail:0\r\ncluster_known_nodes:2\r\ncluster_size:2\r\ncluster_current_epoch:2\r\ncluster_my_epoch:1\r\n" +
			"cluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\ntotal_cluster_links_buffer_limit_exceeded:0\r\n"
		return appendText(nil, info, proto), true
	case eqFold(sub, "myid"), eqFold(sub, "myshardid"):
		return appendBulk(nil, []byte(id(0))), true
	}
	return nil, false
}

// clusterSlotArg is the slot a forwarded CLUSTER subcommand concerns: KEYSLOT
// key, COUNTKEYSINSLOT slot, GETKEYSINSLOT slot count; -1 for the others.
func clusterSlotArg(args [][]byte) int {
	if len(args) < 3 {
		return -1
	}
	switch {
	case eqFold(args[1], "keyslot"):
		return keySlot(args[2])
	case eqFold(args[1], "countkeysinslot"), eqFold(args[1], "getkeysinslot"):
		if n, err := strconv.Atoi(string(args[2])); err == nil && n >= 0 && n < numSlots {
			return n
		}
	}
	return -1
}

func appendInt(b []byte, n int) []byte {
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

func appendMapHeader(b []byte, n, proto int) []byte {
	if proto >= 3 {
		b = append(b, '%')
		b = strconv.AppendInt(b, int64(n), 10)
	} else {
		b = append(b, '*')
		b = strconv.AppendInt(b, int64(2*n), 10)
	}
	return append(b, '\r', '\n')
}

// appendText is a bulk string in RESP2, a verbatim "txt" string in RESP3.
func appendText(b []byte, s string, proto int) []byte {
	if proto < 3 {
		return appendBulk(b, []byte(s))
	}
	b = append(b, '=')
	b = strconv.AppendInt(b, int64(len(s)+4), 10)
	b = append(b, "\r\ntxt:"...)
	b = append(b, s...)
	return append(b, '\r', '\n')
}
