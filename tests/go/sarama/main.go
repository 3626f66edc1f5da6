// Produce or consume with Sarama (Go, its own protocol code), as a Go service would.
//
//	sarama-client produce BOOTSTRAP TOPIC CODEC < messages.json
//	  messages.json: [{"partition": 0, "key": "k", "value": "v", "timestamp": 1700000000000,
//	                   "headers": [["name", "value"], ...]}, ...]; an idempotent producer, acks=all.
//	sarama-client consume BOOTSTRAP TOPIC GROUP COUNT
//	  joins GROUP, reads COUNT messages from its committed offsets (else the oldest), commits them,
//	  prints them as JSON.
//
// Exits 1 on an error.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

type message struct {
	Partition int32       `json:"partition"`
	Offset    int64       `json:"offset"`
	Key       string      `json:"key"`
	Value     string      `json:"value"`
	Timestamp int64       `json:"timestamp"`
	Headers   [][2]string `json:"headers,omitempty"`
}

type sent struct {
	Partition int32       `json:"partition"`
	Key       string      `json:"key"`
	Value     string      `json:"value"`
	Timestamp int64       `json:"timestamp"`
	Headers   [][2]string `json:"headers"`
}

func config() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V2_1_0_0 // Produce v3+, Fetch v4+: what a Kafka 4 broker still serves
	c.ClientID = "weir-test-sarama"
	return c
}

func produce(bootstrap, topic, codec string) error {
	var messages []sent
	if err := json.NewDecoder(os.Stdin).Decode(&messages); err != nil {
		return err
	}
	c := config()
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Idempotent = true
	c.Net.MaxOpenRequests = 1 // Sarama's idempotent producer requires it
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Producer.Return.Successes = true
	c.Producer.Flush.Frequency = 5 * time.Millisecond
	codecs := map[string]sarama.CompressionCodec{"none": sarama.CompressionNone, "gzip": sarama.CompressionGZIP,
		"snappy": sarama.CompressionSnappy, "lz4": sarama.CompressionLZ4, "zstd": sarama.CompressionZSTD}
	c.Producer.Compression = codecs[codec]
	producer, err := sarama.NewAsyncProducer(strings.Split(bootstrap, ","), c)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		var first error
		for i := 0; i < len(messages); i++ {
			select {
			case <-producer.Successes():
			case e := <-producer.Errors():
				if first == nil {
					first = e.Err
				}
			}
		}
		done <- first
	}()
	for _, m := range messages {
		var headers []sarama.RecordHeader
		for _, h := range m.Headers {
			headers = append(headers, sarama.RecordHeader{Key: []byte(h[0]), Value: []byte(h[1])})
		}
		producer.Input() <- &sarama.ProducerMessage{Topic: topic, Partition: m.Partition, Key: sarama.StringEncoder(m.Key),
			Value: sarama.StringEncoder(m.Value), Headers: headers, Timestamp: time.Unix(0, m.Timestamp*int64(time.Millisecond))}
	}
	err = <-done
	if closeErr := producer.Close(); err == nil {
		err = closeErr
	}
	return err
}

type reader struct { // ConsumeClaim runs in a goroutine per partition
	count int
	lock  sync.Mutex
	out   []message
	done  chan struct{}
}

func (r *reader) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (r *reader) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (r *reader) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		var headers [][2]string
		for _, h := range m.Headers {
			headers = append(headers, [2]string{string(h.Key), string(h.Value)})
		}
		session.MarkMessage(m, "")
		r.lock.Lock()
		r.out = append(r.out, message{Partition: m.Partition, Offset: m.Offset, Key: string(m.Key), Value: string(m.Value),
			Timestamp: m.Timestamp.UnixNano() / int64(time.Millisecond), Headers: headers})
		if len(r.out) == r.count {
			close(r.done)
		}
		r.lock.Unlock()
	}
	return nil
}

func consume(bootstrap, topic, group string, count int) error {
	c := config()
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.CommitInterval = time.Hour // committed once, on close
	// No retention set: Sarama 1.22 commits with OffsetCommit v1, which Kafka 3.9 serves (and
	// Kafka 4 no longer does, KIP-896)
	c.Consumer.Return.Errors = true
	client, err := sarama.NewClient(strings.Split(bootstrap, ","), c)
	if err != nil {
		return err
	}
	defer client.Close()
	consumerGroup, err := sarama.NewConsumerGroupFromClient(group, client)
	if err != nil {
		return err
	}
	r := &reader{count: count, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	failed := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := consumerGroup.Consume(ctx, []string{topic}, r); err != nil {
				failed <- err
				return
			}
		}
	}()
	select {
	case <-r.done:
	case err = <-failed:
	case err = <-consumerGroup.Errors():
	case <-time.After(90 * time.Second):
		r.lock.Lock()
		err = fmt.Errorf("read %d of %d messages", len(r.out), count)
		r.lock.Unlock()
	}
	cancel()
	if closeErr := consumerGroup.Close(); err == nil {
		err = closeErr // the offsets marked are committed here
	}
	if err != nil {
		return err
	}
	r.lock.Lock()
	defer r.lock.Unlock()
	return json.NewEncoder(os.Stdout).Encode(r.out)
}

func main() {
	args := os.Args[1:]
	var err error
	switch {
	case len(args) == 4 && args[0] == "produce":
		err = produce(args[1], args[2], args[3])
	case len(args) == 5 && args[0] == "consume":
		count, convErr := strconv.Atoi(args[4])
		if convErr != nil {
			err = convErr
		} else {
			err = consume(args[1], args[2], args[3], count)
		}
	default:
		err = fmt.Errorf("usage: produce BOOTSTRAP TOPIC CODEC | consume BOOTSTRAP TOPIC GROUP COUNT")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
