package registry

import (
	"errors"
	"fmt"
	"github.com/corekube/corekube/watch"
	"net/http"

	"github.com/corekube/corekube/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Messages kube uses verbatim.
const (
	optimisticLockMessage = "the object has been modified; please apply your changes to the latest version and try again"
	listTooOldMessage     = "The resourceVersion for the provided list is too old."
	continueTooOldMessage = "The provided continue parameter is too old to display a consistent list result. " +
		"You can start a new list without the continue parameter, or use the continue token in this response to " +
		"retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - " +
		"objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
)

// toAPIError is the one table that turns storage errors into Kubernetes
// Status errors. Errors that already are Status errors pass through, so
// strategies and admission plugins can return them from inside storage
// callbacks.
func toAPIError(err error, gr schema.GroupResource, name string) error {
	if err == nil {
		return nil
	}
	var status apierrors.APIStatus
	switch {
	case errors.As(err, &status):
		return err
	case errors.Is(err, storage.ErrNotFound):
		return apierrors.NewNotFound(gr, name)
	case errors.Is(err, storage.ErrAlreadyExists):
		return apierrors.NewAlreadyExists(gr, name)
	case errors.Is(err, storage.ErrConflict):
		return apierrors.NewConflict(gr, name, errors.New(optimisticLockMessage))
	case errors.Is(err, storage.ErrCompacted):
		return apierrors.NewResourceExpired(listTooOldMessage)
	case errors.Is(err, storage.ErrFutureRevision):
		// One answer for a revision not reached yet, whoever found it: the
		// watch cache knows both revisions, etcd names neither.
		var tooLarge *watch.TooLargeError
		if errors.As(err, &tooLarge) {
			return tooLargeResourceVersion(tooLarge.Requested, tooLarge.Current)
		}
		return tooLargeResourceVersion(0, 0)
	case errors.Is(err, storage.ErrUnavailable):
		return unavailableError(err)
	default:
		return apierrors.NewInternalError(fmt.Errorf("%s %q: %w", gr, name, err))
	}
}

// unavailableError is kube-apiserver's answer when etcd could not serve a
// request (no leader, no quorum, timed out): its storage passes etcd's
// error through, which becomes a 500 Status with no reason and etcd's own
// message (such as "etcdserver: request timed out").
func unavailableError(err error) error {
	msg := err.Error()
	var ue *storage.UnavailableError
	if errors.As(err, &ue) {
		msg = ue.Err.Error()
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: msg,
	}}
}
