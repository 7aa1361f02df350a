package registry

import "context"

type warningsKey struct{}

// WithWarnings returns ctx in which AddWarning calls add, for the handler
// to answer them as Warning headers.
func WithWarnings(ctx context.Context, add func(msg string)) context.Context {
	return context.WithValue(ctx, warningsKey{}, add)
}

// AddWarning adds a warning to the response of the request ctx belongs to
// (kube's warning.AddWarning: a Warning header kubectl prints); without a
// handler that answers warnings, it is dropped.
func AddWarning(ctx context.Context, msg string) {
	if add, ok := ctx.Value(warningsKey{}).(func(string)); ok {
		add(msg)
	}
}
