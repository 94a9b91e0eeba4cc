PresenceServerCommand.main()
