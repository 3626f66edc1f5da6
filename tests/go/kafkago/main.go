// segmentio/kafka-go 0.2.1 (Debian's golang-github-segmentio-kafka-go-dev), a 2019 pure-Go
// client that speaks fixed, old versions without asking ApiVersions: CreateTopics v0, Metadata
// v1, Produce v2 and Fetch v2 (message format 1), ListOffsets v1.
//
//	kafka-go-client create BOOTSTRAP TOPIC PARTITIONS
//	kafka-go-client round-trip BOOTSTRAP TOPIC COUNT
//	  writes COUNT messages to partition 0 and reads them back, printing the values as JSON.
//
// Exits 1 with the error on stderr.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	kafka "github.com/segmentio/kafka-go"
)

func create(bootstrap, topic string, partitions int) error {
	conn, err := kafka.Dial("tcp", bootstrap)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	return conn.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1})
}

func roundTrip(bootstrap, topic string, count int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := kafka.DialLeader(ctx, "tcp", bootstrap, topic, 0)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	var messages []kafka.Message
	for i := 0; i < count; i++ {
		messages = append(messages, kafka.Message{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i))})
	}
	if _, err := conn.WriteMessages(messages...); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if _, err := conn.Seek(0, kafka.SeekAbsolute); err != nil {
		return err
	}
	var values []string
	for len(values) < count {
		m, err := conn.ReadMessage(1 << 20)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		values = append(values, string(m.Value))
	}
	return json.NewEncoder(os.Stdout).Encode(values)
}

func main() {
	args := os.Args[1:]
	var err error
	switch {
	case len(args) == 4 && (args[0] == "create" || args[0] == "round-trip"):
		n, convErr := strconv.Atoi(args[3])
		if convErr != nil {
			err = convErr
		} else if args[0] == "create" {
			err = create(args[1], args[2], n)
		} else {
			err = roundTrip(args[1], args[2], n)
		}
	default:
		err = fmt.Errorf("usage: create BOOTSTRAP TOPIC PARTITIONS | round-trip BOOTSTRAP TOPIC COUNT")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
