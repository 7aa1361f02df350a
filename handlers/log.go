package handlers

import (
	"context"
	"log/slog"
	"net/http"
)

// loggerKey is the request context key of the server's logger.
type loggerKey struct{}

// WithLogger returns middleware that hands log to the handlers of every
// request it passes on: what they log (internal errors, failed
// encodings, cut streams) goes to the server's logger rather than the
// process-wide default.
func WithLogger(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), loggerKey{}, log)))
		})
	}
}

// discardLogger stands in when no server handed a logger (a handler
// called on its own, in a test): the process-wide logger is not the
// server's to write to.
var discardLogger = slog.New(slog.DiscardHandler)

// loggerFrom returns the logger WithLogger put in ctx.
func loggerFrom(ctx context.Context) *slog.Logger {
	if log, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok && log != nil {
		return log
	}
	return discardLogger
}
