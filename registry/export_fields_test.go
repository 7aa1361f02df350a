package registry

import "github.com/corekube/corekube/watch"

// SetSkipLiveValidation turns the unvalidated conversion of trusted live
// objects on or off for a test; restore undoes it.
func SetSkipLiveValidation(on bool) (restore func()) {
	was := skipLiveValidation
	skipLiveValidation = on
	return func() { skipLiveValidation = was }
}

// TrustedConversions is the number of live objects converted without
// validation so far.
func TrustedConversions() int64 { return trustedConversions.Load() }

// SetUpdateFastPaths turns the update fast paths on or off for a test:
// starting from the watch cache's copy, and one encoding when only
// managedFields times change. restore undoes it.
func SetUpdateFastPaths(on bool) (restore func()) {
	cached, twice := useCachedCurrent, encodeTwice
	useCachedCurrent, encodeTwice = on, !on
	return func() { useCachedCurrent, encodeTwice = cached, twice }
}

// StaleCurrents is the number of updates so far whose cached starting
// point was stale.
func StaleCurrents() int64 { return staleCurrents.Load() }

// MessageStarts is the number of updates so far that started from an
// object decoded from the watch cache's protobuf message.
func MessageStarts() int64 { return messageStarts.Load() }

// CachedObject is the watch cache's object of namespace/name, if it has it.
func CachedObject(s *Store, namespace, name string) (*watch.Object, bool) {
	return s.cache.Get(s.key(namespace, name))
}

// SetJSONWriteBatch sets how many items ListPage.WriteJSON encodes at a
// time, for a test; restore undoes it.
func SetJSONWriteBatch(n int) (restore func()) {
	was := jsonWriteBatch
	jsonWriteBatch = n
	return func() { jsonWriteBatch = was }
}
