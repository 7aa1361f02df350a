package rawproto

import "errors"

// metaManagedFields is ObjectMeta's managedFields: repeated
// ManagedFieldsEntry, its highest field number.
const metaManagedFields = 17

// errNotARun stops ManagedFields' walk at a field after the entries.
var errNotARun = errors.New("rawproto: managedFields are not metadata's last fields")

// ManagedFields finds the metadata.managedFields entries of msg, the
// protobuf message of a kube top-level object, as gogo's Marshal writes
// them: fields in number order, so the entries are one run of field-17
// records ending where metadata ends. It returns where the run starts in
// msg and each entry's record (key, length and value; the run is their
// concatenation, in order), sharing msg's bytes. ok is false when msg has
// no entries, when they are not such a run (a message gogo did not
// write), or when msg does not parse.
func ManagedFields(msg []byte) (start int, entries [][]byte, ok bool) {
	_, metaStart, metaEnd, err := metadataField(msg)
	if err != nil {
		return 0, nil, false
	}
	meta := msg[metaStart:metaEnd]
	start = -1
	err = eachField(meta, func(num, wire, key, _, end int) error {
		if num == metaManagedFields && wire == wireBytes {
			if start < 0 {
				start = key
			}
			entries = append(entries, meta[key:end:end])
			return nil
		}
		if start >= 0 {
			return errNotARun
		}
		return nil
	})
	if err != nil || start < 0 {
		return 0, nil, false
	}
	return metaStart + start, entries, true
}
