// Package syncdir makes a folder's entries durable: a file created,
// renamed or removed in a folder keeps its name after a power cut only
// once the folder itself is synced.
//
//	if err := os.Rename(tmp, path); err != nil { … }
//	if err := syncdir.Sync(filepath.Dir(path)); err != nil { … }
package syncdir
