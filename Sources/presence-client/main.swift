PresenceClientCommand.main()
