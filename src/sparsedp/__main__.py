from sparsedp.cli import main

main()
