package authenticator

import (
	"context"
	"slices"
)

type audiencesKey struct{}

// WithAudiences returns ctx asking token authenticators to accept only
// tokens meant for one of audiences (kube's authenticator.WithAudiences): a
// TokenReview's spec.audiences. Without it, authenticators use the API
// server's own audiences.
func WithAudiences(ctx context.Context, audiences []string) context.Context {
	return context.WithValue(ctx, audiencesKey{}, audiences)
}

// AudiencesFrom returns the audiences ctx asks for, and whether it asks.
func AudiencesFrom(ctx context.Context) ([]string, bool) {
	auds, ok := ctx.Value(audiencesKey{}).([]string)
	return auds, ok
}

// IntersectAudiences returns the audiences in both a and b, in a's order.
func IntersectAudiences(a, b []string) []string {
	var out []string
	for _, x := range a {
		if slices.Contains(b, x) && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
