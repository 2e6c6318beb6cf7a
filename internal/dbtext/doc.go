// Package dbtext makes text that a peer, a requester or a model wrote into
// text every database snapnode runs on keeps as it is. SQLite keeps any
// bytes in a TEXT column; PostgreSQL's text refuses a NUL and bytes that
// are not UTF-8, failing the whole transaction. A store cleans such text
// before it writes it, so that the same input succeeds on both:
//
//	_, err := tx.ExecContext(ctx, q, dbtext.Clean(job.Reason))
package dbtext
