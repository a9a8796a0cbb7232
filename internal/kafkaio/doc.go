// Package kafkaio adapts kafka-go to the shapes Hotspot's services consume:
// a consumer-group member that hands out one partition reader per assigned
// partition and commits offsets explicitly; and, for writers, a Transport
// that follows a partition's leader when it moves and a Resender that hands
// the records an asynchronous Writer gave up on to it again, for long enough
// to outlast a broker's restart.
//
// Invariant: nothing is committed behind the caller's back. A Group never
// auto-commits; the only offsets stored for the group are those passed to
// Generation.Commit. Every kafka-go configuration is validated when the Group
// is built, so no later kafka-go constructor can panic on it. A record
// written through a Resender reaches its Done exactly once: acknowledged, or
// given up.
package kafkaio
