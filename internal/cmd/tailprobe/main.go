package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"slices"
	"time"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
)

const msgSize = 1024

// options are the variants of a run.
type options struct {
	allocKB    int
	split      bool
	peerReader bool
}

// garbage allocates kb KiB in 512-byte objects, kept in *keep until the
// next call, as a request's decoding and encoding leave garbage behind.
func garbage(keep *[][]byte, kb int) {
	*keep = (*keep)[:0]
	for range kb * 2 {
		*keep = append(*keep, make([]byte, 512))
	}
}

func main() {
	serve := flag.Bool("serve", false, "run the server side")
	addr := flag.String("listen", "127.0.0.1:0", "server: address to listen on")
	serverUS := flag.Int("server-us", 1100, "server: CPU per request, in µs of signing and verifying")
	to := flag.String("to", "", "peer: the server's address")
	beforeUS := flag.Int("before-us", 250, "peer: CPU before each request, µs")
	afterUS := flag.Int("after-us", 250, "peer: CPU after each answer, µs")
	duration := flag.Duration("duration", 10*time.Second, "peer: how long to run")
	var o options
	flag.IntVar(&o.allocKB, "alloc-kb", 0, "both: garbage to allocate a request, in KiB of 512-byte objects")
	flag.BoolVar(&o.split, "split", false, "server: the reader does the first unit itself, as the relay verifies an event before handing it on")
	flag.BoolVar(&o.peerReader, "peer-reader", false, "peer: read answers in a goroutine of their own and hand them over, as a relay pool does")
	flag.Parse()
	w := newWork()
	if *serve {
		runServer(*addr, w, w.units(*serverUS), o)
		return
	}
	runPeer(*to, w, w.units(*beforeUS), w.units(*afterUS), *duration, o)
}

// work is one unit of real cryptography: a BIP-340 verification.
type work struct {
	pub  *btcec.PublicKey
	sig  *schnorr.Signature
	hash [32]byte
	per  time.Duration
}

func newWork() *work {
	k, err := btcec.NewPrivateKey()
	if err != nil {
		log.Fatal(err)
	}
	w := &work{pub: k.PubKey(), hash: sha256.Sum256([]byte("tailprobe"))}
	if w.sig, err = schnorr.Sign(k, w.hash[:]); err != nil {
		log.Fatal(err)
	}
	w.do(100)
	const n = 2000
	start := time.Now()
	for range n {
		w.do(1)
	}
	w.per = time.Since(start) / n
	return w
}

func (w *work) units(us int) int {
	return int((time.Duration(us)*time.Microsecond + w.per/2) / w.per)
}

func (w *work) do(n int) {
	for range n {
		if !w.sig.Verify(w.hash[:], w.pub) {
			log.Fatal("verify failed")
		}
	}
}

func runServer(addr string, w *work, n int, o options) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening %s (%d units of %v a request)\n", ln.Addr(), n, w.per)
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go serveConn(c, w, n, o)
	}
}

// serveConn hands each request across two goroutines, as the node's relay
// reader hands an event to an inbox worker and the worker the answer to the
// connection's writer.
func serveConn(c net.Conn, w *work, n int, o options) {
	defer c.Close()
	toWorker := make(chan []byte, 16)
	toWriter := make(chan []byte, 16)
	go func() {
		var keep [][]byte
		for m := range toWorker {
			if o.split {
				w.do(n - 1)
			} else {
				w.do(n)
			}
			garbage(&keep, o.allocKB)
			toWriter <- m
		}
		close(toWriter)
	}()
	go func() {
		for m := range toWriter {
			if _, err := c.Write(m); err != nil {
				return
			}
		}
	}()
	r := bufio.NewReader(c)
	for {
		m := make([]byte, msgSize)
		if _, err := io.ReadFull(r, m); err != nil {
			close(toWorker)
			return
		}
		if o.split {
			w.do(1)
		}
		toWorker <- m
	}
}

func runPeer(to string, w *work, before, after int, d time.Duration, o options) {
	c, err := net.Dial("tcp", to)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	m := make([]byte, msgSize)
	answers := make(chan []byte, 16)
	if o.peerReader {
		go func() {
			for {
				a := make([]byte, msgSize)
				if _, err := io.ReadFull(c, a); err != nil {
					close(answers)
					return
				}
				answers <- a
			}
		}()
	}
	var lat []time.Duration
	var keep [][]byte
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		start := time.Now()
		w.do(before)
		binary.BigEndian.PutUint64(m, uint64(i))
		if _, err := c.Write(m); err != nil {
			log.Fatal(err)
		}
		if o.peerReader {
			if _, ok := <-answers; !ok {
				log.Fatal("connection closed")
			}
		} else if _, err := io.ReadFull(c, m); err != nil {
			log.Fatal(err)
		}
		garbage(&keep, o.allocKB)
		w.do(after)
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
	fmt.Fprintf(os.Stdout, "%d requests (%d+%d units of %v): p50 %v p99 %v p999 %v max %v; p99/p50 %.2f\n",
		len(lat), before, after, w.per, q(0.5).Round(time.Microsecond), q(0.99).Round(time.Microsecond),
		q(0.999).Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond), float64(q(0.99))/float64(q(0.5)))
}
