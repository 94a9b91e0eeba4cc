import CLibWebSockets
import PresenceCore

extension LWSServer {
    /// Starts the storage thread and the one-second heartbeat, and stores what restoring produced.
    func startStorage() {
        guard let storage else { return }
        let writer = StorageWriter(
            storage: storage,
            onDurable: { [self] sequence in
                durableSequence.store(sequence, ordering: .releasing)
                if let context = signalContext { lws_cancel_service(context) }
            },
            onFailure: { [self] error in
                // Acknowledging writes that are not stored would lie to clients: stop instead.
                logger.critical("storage failed, stopping: \(error)")
                LWSServer.requestStop()
            })
        writer.start()
        storageWriter = writer
        if let batch = engine.takeJournal() { writer.submit(batch) }
        beat()
    }

    /// Records "still alive at T" every second: after a crash, sessions count as ended there.
    func beat() {
        guard let context, let writer = storageWriter else { return }
        writer.submit(StorageBatch(mutations: [.heartbeat(now())]))
        if heartbeatTimer == nil { heartbeatTimer = makeTimer() }
        lws_sul_schedule(context, 0, &heartbeatTimer!.pointee.sul, { sul in
            guard let sul else { return }
            LWSServer.owner(of: sul).beat()
        }, 1_000_000)
    }

    /// Storage made steps up to some sequence durable: release the acknowledgements held for them.
    func releaseDurable() {
        let durable = durableSequence.load(ordering: .acquiring)
        guard durable > releasedSequence else { return }
        releasedSequence = durable
        for id in heldConnections {
            guard let connection = connections[id] else {
                heldConnections.remove(id)
                continue
            }
            var released = 0
            for item in connection.held {
                guard item.sequence <= durable else { break }
                if let reply = item.reply { ackSent(reply, on: connection) }
                connection.enqueue(item.frame)
                released += 1
            }
            if released > 0 {
                connection.held.removeFirst(released)
                lws_callback_on_writable(connection.wsi)
            }
            if connection.held.isEmpty { heldConnections.remove(id) }
        }
        for (wsi, response) in httpResponses where response.sequence <= durable {
            lws_callback_on_writable(wsi)
        }
    }

    /// After the loop ended: store the last changes (the goodbyes of a graceful stop) and close.
    func stopStorage() {
        guard let writer = storageWriter else { return }
        if let batch = engine.takeJournal() { writer.submit(batch) }
        writer.submit(StorageBatch(mutations: [.heartbeat(now())]))
        writer.stop()
        storageWriter = nil
        do {
            try storage?.close()
        } catch {
            logger.error("closing storage: \(error)")
        }
    }
}
