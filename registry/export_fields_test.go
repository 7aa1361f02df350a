package registry

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
