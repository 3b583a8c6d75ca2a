"""Services: the business logic every interface calls."""
